import { closeSync, fstatSync, openSync, readSync, watch, type FSWatcher } from "node:fs";

const READ_CHUNK = 64 * 1024;
// Read and handed on per event-loop turn: ~2 ms of parsing at ~30 MiB/s, so HTTP handlers never wait on a backlog.
export const SLICE_BYTES = 64 * 1024;
// inotify wakes us at once; the batch delay folds a flood of writes into one read.
const BATCH_DELAY_MS = 25;
// A safety net for filesystems where inotify says nothing (NFS, some overlays).
const FALLBACK_POLL_MS = 1000;

export interface LogFollower {
  /** Reads what is there, one slice a turn, yielding to the event loop between slices. */
  drain(): void;
  /** Reads synchronously to EOF, so the caller has every byte written before the stop, then closes. */
  stop(): void;
}

// Follows a file the trainer appends to; the trainer never writes into a pipe of ours.
export function followLog(path: string, onText: (text: string) => void): LogFollower {
  const fd = openSync(path, "r");
  const decoder = new TextDecoder("utf-8");
  const buf = Buffer.alloc(READ_CHUNK);
  let offset = 0;
  let pending: Timer | null = null;
  let slicing: ReturnType<typeof setImmediate> | null = null;
  let stopped = false;

  // Reads at most `budget` bytes; true when it reached EOF.
  const read = (budget: number): boolean => {
    // The shim cut the log to its cap: what was dropped is gone, follow on from the new end.
    offset = Math.min(offset, fstatSync(fd).size);
    for (let left = budget; left > 0; ) {
      const n = readSync(fd, buf, 0, Math.min(READ_CHUNK, left), offset);
      if (n === 0) return true;
      offset += n;
      left -= n;
      const text = decoder.decode(buf.subarray(0, n), { stream: true });
      if (text !== "") onText(text);
    }
    return false;
  };
  // setImmediate, not setTimeout(0): it runs right after the I/O poll, so sockets get their turn without a
  // timer's 1 ms clamp slowing a backlog down.
  const slice = () => {
    slicing = null;
    if (!stopped && !read(SLICE_BYTES)) slicing = setImmediate(slice);
  };
  const drain = () => {
    if (pending) clearTimeout(pending);
    pending = null;
    // A slice in flight carries on to EOF, and so covers whatever woke us.
    if (!slicing) slice();
  };
  const schedule = () => {
    pending ??= setTimeout(drain, BATCH_DELAY_MS);
  };
  const watcher: FSWatcher = watch(path, schedule);
  const poll = setInterval(schedule, FALLBACK_POLL_MS);

  return {
    drain,
    stop() {
      if (stopped) return;
      if (pending) clearTimeout(pending);
      if (slicing) clearImmediate(slicing);
      try {
        // The trainer has exited: its last words decide the outcome, so read them all now.
        read(Number.POSITIVE_INFINITY);
        const rest = decoder.decode();
        if (rest !== "") onText(rest);
      } finally {
        // A throwing onText must not leak the fd and the inotify watch.
        stopped = true;
        watcher.close();
        clearInterval(poll);
        closeSync(fd);
      }
    },
  };
}
