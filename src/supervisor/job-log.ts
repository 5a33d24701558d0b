import { closeSync, fstatSync, openSync, readSync } from "node:fs";
import { carryOffset, cutsNow } from "../job-dir/log-cut.ts";

// train.log, from the worker's side: followed as the trainer appends (in slices that yield to the HTTP server), and
// tailed for GET /train/{id}/log and the outcome (job-dir/log-tail.ts). The shim cuts it to a cap (job-dir/log-cut.ts).

const READ_CHUNK = 64 * 1024;
// Read and handed on per event-loop turn: ~2 ms of parsing at ~30 MiB/s, so HTTP handlers never wait on a backlog.
export const SLICE_BYTES = 64 * 1024;

interface LogFollower {
  // Reads what is there now, one slice a turn, yielding to the event loop between slices.
  drain(): void;
  // Milliseconds since the last read began.
  sinceRead(): number;
  // Reads to EOF, a slice a turn, so the caller has every byte written before the stop, then closes.
  stop(): Promise<void>;
}

// Follows a file the trainer appends to; the trainer never writes into a pipe of ours. One look per tick, whatever
// the trainer writes in between: a flood of redraws costs a read a tick, not a wake-up per write, and a log on a
// network filesystem (written on another node, where inotify says nothing) is followed the same way. `interval` is
// asked at each look for the time to the next; a look on demand (drain) starts that interval over.
export function followLog(path: string, onText: (text: string) => void, interval: () => number): LogFollower {
  const fd = openSync(path, "r");
  let decoder = new TextDecoder("utf-8");
  const buf = Buffer.alloc(READ_CHUNK);
  let offset = 0;
  // The generation `offset` belongs to; null until the record is first seen (or with none: an older shim's log).
  let generation: string | null = null;
  let slicing: ReturnType<typeof setImmediate> | null = null;
  let tick: ReturnType<typeof setTimeout> | null = null;
  let readAt = Number.NEGATIVE_INFINITY;
  let stopped = false;

  // Reads at most `budget` bytes; true when it reached EOF (or must wait: a cut is under way). One read a tick while
  // the trainer writes less than a chunk between two ticks: a short read of a regular file is its end, as of now.
  // Each chunk is read between two looks at the log's cut record (log-cut.ts) and taken only when both see the same
  // generation: a cut between two reads carries the offset across it, so no byte of another place is ever read as
  // the next. `final`: the shim is gone, and a record it left mid-cut waits for nothing.
  const read = (budget: number, final = false): boolean => {
    readAt = performance.now();
    for (let left = budget; left > 0; ) {
      const before = cutsNow(path);
      if (before === "unsettled" && !final) return true;
      const cuts = typeof before === "object" ? before : null;
      if (cuts !== null && generation !== null && cuts.generation !== generation) {
        offset = carryOffset({ generation, offset }, cuts);
        decoder = new TextDecoder("utf-8");
      }
      generation = cuts?.generation ?? generation;
      const want = Math.min(READ_CHUNK, left);
      const n = readSync(fd, buf, 0, want, offset);
      if (cuts !== null) {
        const after = cutsNow(path);
        if (typeof after !== "object" || after.generation !== cuts.generation) return true;
      }
      if (n === 0) {
        // Nothing past the offset: the end, or (without a record) the shim cut the log to its cap: what was
        // dropped is gone, follow on from the new end.
        offset = Math.min(offset, fstatSync(fd).size);
        return true;
      }
      offset += n;
      left -= n;
      const text = decoder.decode(buf.subarray(0, n), { stream: true });
      if (text !== "") onText(text);
      if (n < want) return true;
    }
    return false;
  };
  // setImmediate, not setTimeout(0): it runs right after the I/O poll, so sockets get their turn without a
  // timer's 1 ms clamp slowing a backlog down.
  const slice = () => {
    slicing = null;
    if (!stopped && !read(SLICE_BYTES)) slicing = setImmediate(slice);
  };
  // A slice in flight carries on to EOF, and so covers whatever the look came for.
  const drain = () => {
    if (stopped) return;
    if (tick) clearTimeout(tick);
    tick = setTimeout(drain, interval());
    if (!slicing) slice();
  };
  tick = setTimeout(drain, interval());

  return {
    drain,
    sinceRead: () => performance.now() - readAt,
    async stop() {
      if (stopped) return;
      stopped = true;
      if (tick) clearTimeout(tick);
      if (slicing) clearImmediate(slicing);
      try {
        // The trainer has exited: its last words decide the outcome, so read them all, yielding between slices
        // as a live read does (a backlog nobody read may be megabytes of redraws).
        while (!read(SLICE_BYTES, true)) await new Promise((resolve) => setImmediate(resolve));
        const rest = decoder.decode();
        if (rest !== "") onText(rest);
      } finally {
        // A throwing onText must not leak the fd.
        closeSync(fd);
      }
    },
  };
}
