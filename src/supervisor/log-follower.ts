import { closeSync, fstatSync, openSync, readSync, watch, type FSWatcher } from "node:fs";

const READ_CHUNK = 64 * 1024;
// inotify wakes us at once; the batch delay folds a flood of writes into one read.
const BATCH_DELAY_MS = 25;
// A safety net for filesystems where inotify says nothing (NFS, some overlays).
const FALLBACK_POLL_MS = 1000;

export interface LogFollower {
  drain(): void;
  stop(): void;
}

// Follows a file the trainer appends to; the trainer never writes into a pipe of ours.
export function followLog(path: string, onText: (text: string) => void): LogFollower {
  const fd = openSync(path, "r");
  const decoder = new TextDecoder("utf-8");
  const buf = Buffer.alloc(READ_CHUNK);
  let offset = 0;
  let pending: Timer | null = null;
  let stopped = false;

  const drain = () => {
    if (pending) clearTimeout(pending);
    pending = null;
    if (stopped) return;
    // The shim cut the log to its cap: what was dropped is gone, follow on from the new end.
    offset = Math.min(offset, fstatSync(fd).size);
    for (let n = readSync(fd, buf, 0, READ_CHUNK, offset); n > 0; n = readSync(fd, buf, 0, READ_CHUNK, offset)) {
      offset += n;
      const text = decoder.decode(buf.subarray(0, n), { stream: true });
      if (text !== "") onText(text);
    }
  };
  const schedule = () => {
    pending ??= setTimeout(drain, BATCH_DELAY_MS);
  };
  const watcher: FSWatcher = watch(path, schedule);
  const poll = setInterval(schedule, FALLBACK_POLL_MS);

  return {
    drain,
    stop() {
      drain();
      stopped = true;
      watcher.close();
      clearInterval(poll);
      closeSync(fd);
    },
  };
}
