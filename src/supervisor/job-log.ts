import { closeSync, fstatSync, openSync, readSync } from "node:fs";
import { carryOffset, cutsNow } from "./log-cut.ts";
import { screenLine } from "../progress/progress.ts";

// train.log, from the worker's side: followed as the trainer appends (in slices that yield to the HTTP server), and
// tailed for GET /train/{id}/log and the outcome. The shim cuts it to a cap (log-cut.ts).

const READ_CHUNK = 64 * 1024;
// Read and handed on per event-loop turn: ~2 ms of parsing at ~30 MiB/s, so HTTP handlers never wait on a backlog.
export const SLICE_BYTES = 64 * 1024;

interface LogFollower {
  /** Reads what is there now, one slice a turn, yielding to the event loop between slices. */
  drain(): void;
  /** Milliseconds since the last read began. */
  sinceRead(): number;
  /** Reads to EOF, a slice a turn, so the caller has every byte written before the stop, then closes. */
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

export const MAX_TAIL_BYTES = 4 * 1024 * 1024;

export interface Tail {
  lines: string[];
  /** Where the last of `lines` begins in the file: where a reader that goes on from the tail starts. */
  lastLineAt: number;
}

// Reads backwards from the end, so the cost follows the lines asked for, not the log's size.
export function tailOf(path: string, lines: number): Tail {
  let fd: number;
  try {
    fd = openSync(path, "r");
  } catch {
    return { lines: [], lastLineAt: 0 };
  }
  try {
    const { buf, pos } = readTail(fd, lines);
    const text = buf.toString("utf8");
    // The first line is partial unless the read reached the start of the file.
    const shown = screenLines(pos > 0 ? dropPartial(text) : text).slice(-lines);
    return { lines: shown, lastLineAt: pos + lastLineStart(buf) };
  } finally {
    closeSync(fd);
  }
}

export const tailLines = (path: string, lines: number): string[] => tailOf(path, lines).lines;

function readTail(fd: number, lines: number): { buf: Buffer; pos: number } {
  const size = fstatSync(fd).size;
  const chunks: Buffer[] = [];
  let pos = size;
  let newlines = 0;
  while (pos > 0 && newlines <= lines && size - pos < MAX_TAIL_BYTES) {
    const len = Math.min(READ_CHUNK, pos);
    pos -= len;
    const buf = Buffer.alloc(len);
    readSync(fd, buf, 0, len, pos);
    chunks.unshift(buf);
    newlines += countNewlines(buf);
  }
  return { buf: Buffer.concat(chunks), pos };
}

// indexOf is memchr: tens of times faster than looking at each byte in JavaScript.
function countNewlines(buf: Buffer): number {
  let count = 0;
  for (let at = buf.indexOf(10); at !== -1; at = buf.indexOf(10, at + 1)) count++;
  return count;
}

// Where the line screenLines shows last begins in `buf`: after the last "\n", unless nothing but "\r"s follow it
// (no line shows), then after the one before. 0 for a line that began before the read did.
function lastLineStart(buf: Buffer): number {
  const end = buf.lastIndexOf(10);
  if (end === -1) return 0;
  if (!buf.subarray(end + 1).every((byte) => byte === 13)) return end + 1;
  return end === 0 ? 0 : buf.lastIndexOf(10, end - 1) + 1;
}

// Of a partial first line only the text before its first "\r" is cut: each redraw after it is whole, and the
// last one is what a terminal shows of a tqdm line longer than the window.
function dropPartial(text: string): string {
  const end = text.indexOf("\n");
  const first = end < 0 ? text : text.slice(0, end);
  // A "\r" with nothing after it (a "\r\n" ending) starts no redraw.
  const redraw = first.search(/\r[^\r]/);
  return redraw < 0 ? text.slice(first.length + 1) : text.slice(redraw);
}


function screenLines(text: string): string[] {
  const lines = text.split("\n").map(screenLine);
  if (lines.at(-1) === "") lines.pop();
  return lines;
}
