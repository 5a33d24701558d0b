import { closeSync, fstatSync, openSync, readSync } from "node:fs";
import { type Tail, tailOf } from "./log-tail.ts";
import { carryOffset, cutsNow, FIRST_GENERATION, type LogCursor, type LogCuts } from "./log-cut.ts";

// train.log read on from a cursor: the log's generation and a byte offset in it (log-cut.ts says why both). A cursor
// of an earlier generation is carried across the cuts since: an offset in the head every cut keeps stays; one in
// the tail the last cut kept moves with it; any other goes on from the last cut's marker, which says what was dropped.


/** The most one read answers; a reader asks again from the cursor it was given. */
export const READ_MAX_BYTES = 1024 * 1024;
const STEADY_POLL_MS = 10;

// `read` between two looks at the record that see the same generation (the record steady): what it read belongs to that
// generation. A cut under way is waited out for up to `waitMs`.
async function steadyRead<T>(log: string, waitMs: number, read: (cuts: LogCuts) => T) {
  const deadline = performance.now() + waitMs;
  for (;;) {
    const before = cutsNow(log);
    if (before === "unrecorded") return before;
    if (before !== "unsettled") {
      const value = read(before);
      const after = cutsNow(log);
      if (typeof after === "object" && after.generation === before.generation) return { cuts: before, value };
    }
    if (performance.now() >= deadline) return "unsettled";
    await Bun.sleep(STEADY_POLL_MS);
  }
}

// A tail, and a cursor at the start of its last line (a bar may still be drawn on it); null: none can be given.
type CursorTail = Tail & { cursor: LogCursor | null };

export async function tailWithCursor(log: string, lines: number, waitMs: number): Promise<CursorTail> {
  const read = await steadyRead(log, waitMs, () => tailOf(log, lines));
  if (typeof read === "string") return { ...tailOf(log, lines), cursor: null };
  return { ...read.value, cursor: { generation: read.cuts.generation, offset: read.value.lastLineAt } };
}

export type LogRead =
  /** What follows the cursor, up to READ_MAX_BYTES; `cut`: the log was cut since the cursor was handed out. */
  | { kind: "bytes"; bytes: Uint8Array<ArrayBuffer>; next: LogCursor; cut: boolean }
  | { kind: "unrecorded" | "unsettled" }
  /** A cursor this log never handed out. */
  | { kind: "unknown"; why: string };

export async function readAfter(log: string, cursor: LogCursor, waitMs: number): Promise<LogRead> {
  const read = await steadyRead(log, waitMs, (cuts) => readFrom(log, cursor, cuts));
  return typeof read === "string" ? { kind: read } : read.value;
}

function readFrom(log: string, cursor: LogCursor, cuts: LogCuts): LogRead {
  const current = cursor.generation === cuts.generation;
  if (!current && cuts.generation === FIRST_GENERATION) {
    return { kind: "unknown", why: "names a generation this log never had (it was never cut)" };
  }
  const start = current ? cursor.offset : carryOffset(cursor, cuts);
  const { size, from, bytes, splits } = bytesFrom(log, start);
  if (current && start > size) return { kind: "unknown", why: `points past the log's end (${size} bytes)` };
  // Every answer ends on a whole character and every tail on a line: a cursor inside one was never handed out.
  if (splits) return { kind: "unknown", why: `points inside a UTF-8 character (byte ${start} continues it)` };
  return { kind: "bytes", bytes, next: { generation: cuts.generation, offset: from + bytes.length }, cut: !current };
}

interface BytesFrom {
  size: number;
  from: number;
  bytes: Uint8Array<ArrayBuffer>;
  // `from` is inside a UTF-8 character that begins before it.
  splits: boolean;
}

// The longest UTF-8 character, less the byte at `from`: how far back its first byte can be.
const UTF8_LOOKBACK = 3;

// At most READ_MAX_BYTES of the log from `start` (from its end, if that is sooner), with the few bytes before it that
// say whether it splits a character; a missing log is an empty one.
function bytesFrom(log: string, start: number): BytesFrom {
  let fd: number;
  try {
    fd = openSync(log, "r");
  } catch {
    return { size: 0, from: 0, bytes: Buffer.alloc(0), splits: false };
  }
  try {
    const size = fstatSync(fd).size;
    const from = Math.min(start, size);
    const back = Math.min(from, UTF8_LOOKBACK);
    const buf = Buffer.alloc(back + Math.min(size - from, READ_MAX_BYTES));
    const got = buf.length === 0 ? 0 : readSync(fd, buf, 0, buf.length, from - back);
    const read = buf.subarray(back, Math.max(back, got));
    const splits = splitsCharacter(buf.subarray(0, back), read[0]);
    return { size, from, bytes: read.subarray(0, utf8End(read)), splits };
  } finally {
    closeSync(fd);
  }
}

// A continuation byte that a lead byte before it (with only continuation bytes between) still claims. A stray one
// (a trainer's invalid UTF-8) splits nothing: an answer may have ended just before it.
function splitsCharacter(before: Buffer, first: number | undefined): boolean {
  if (first === undefined || (first & 0xc0) !== 0x80) return false;
  for (let at = before.length - 1; at >= 0; at--) {
    const byte = before[at]!;
    if ((byte & 0xc0) === 0x80) continue;
    const length = byte >= 0xf0 ? 4 : byte >= 0xe0 ? 3 : byte >= 0xc0 ? 2 : 1;
    return length > before.length - at;
  }
  return false;
}

// The length of `bytes` less a UTF-8 character cut short at its end, which the next read answers whole.
function utf8End(bytes: Buffer): number {
  for (let at = bytes.length - 1; at >= Math.max(0, bytes.length - 4); at--) {
    const byte = bytes[at]!;
    if ((byte & 0xc0) === 0x80) continue;
    const length = byte >= 0xf0 ? 4 : byte >= 0xe0 ? 3 : byte >= 0xc0 ? 2 : 1;
    return at + length > bytes.length ? at : bytes.length;
  }
  return bytes.length;
}
