import { randomBytes } from "node:crypto";
import { closeSync, fstatSync, ftruncateSync, openSync, readFileSync, readSync, writeSync } from "node:fs";
import { z } from "zod";
import { statOrNull, writeFileAtomic } from "../fs.ts";

// The shim cuts train.log in place while the trainer appends to it, so an offset into the log means something only
// together with the cuts made before it was taken. Beside the log, train.log.cuts records the log's generation ("0"
// before any cut, a new random id after each) and where the last cut put what it kept. A cut rewrites the record
// twice: marked `cutting` before the log changes, then with the new generation once the log is whole again. A reader
// reads the record, then the log, then the record again: the same generation both times, not cutting, and what it
// read belongs to that generation (a seqlock). The record is rewritten in place, not renamed over: its blocks exist,
// so a full disk cannot stop the cut that frees it. Each write is one fixed-size line ending in its CRC-32, so a
// read that races a write is seen as such, never believed.

export const FIRST_GENERATION = "0";
const RECORD_BYTES = 256;

const Generation = z.string().regex(/^(0|[0-9a-f]{16})$/);
export const LogCuts = z.strictObject({
  generation: Generation,
  /** The generation the last cut ended; null when it is not known (the record was lost). */
  previous: Generation.nullable(),
  cutting: z.boolean(),
  /** Bytes at the start of the log that no cut changes. */
  head: z.int().min(0),
  /** Where the tail the last cut kept began before it, where it begins now, and its length. */
  tailFrom: z.int().min(0),
  tailAt: z.int().min(0),
  tailBytes: z.int().min(0),
});
export type LogCuts = z.infer<typeof LogCuts>;

export const logCutsPath = (log: string) => `${log}.cuts`;

// A cut keeps the first and the last quarter of the cap.
const headBytes = (maxBytes: number) => Math.floor(maxBytes / 4);
const crc = (text: string) => Bun.hash.crc32(text).toString(16).padStart(8, "0");

export function encodeCuts(cuts: LogCuts): Buffer {
  const body = JSON.stringify(cuts);
  return Buffer.from(`${`${body} ${crc(body)}`.padEnd(RECORD_BYTES - 1)}\n`);
}

/** The record in `text`; null when it is not whole (read while it was written) or not a record. */
export function decodeCuts(text: string): LogCuts | null {
  const line = text.trimEnd();
  const at = line.lastIndexOf(" ");
  if (at < 0 || crc(line.slice(0, at)) !== line.slice(at + 1)) return null;
  try {
    return LogCuts.safeParse(JSON.parse(line.slice(0, at))).data ?? null;
  } catch {
    return null;
  }
}

function writeCuts(path: string, cuts: LogCuts): void {
  const fd = openSync(path, "r+");
  try {
    const record = encodeCuts(cuts);
    writeSync(fd, record, 0, record.length, 0);
  } finally {
    // On a network filesystem the close is what makes the write visible to a reader on another node.
    closeSync(fd);
  }
}

/** The record of a log not cut yet. */
export const uncutLog = (head: number): LogCuts => ({
  generation: FIRST_GENERATION,
  previous: null,
  cutting: false,
  head,
  tailFrom: head,
  tailAt: head,
  tailBytes: 0,
});

// A new generation whose cut kept nothing past the head that a reader could find: a cut that did not finish.
const unplacedCut = (previous: string | null, head: number): LogCuts => ({
  ...uncutLog(head),
  generation: randomBytes(8).toString("hex"),
  previous,
});

/**
 * The record as the shim finds it at its start and before each cut: created when missing (generation "0" while the
 * log is still empty), and repaired when it cannot be read or a cut was left half done (the shim was killed in it).
 */
export function repairedCuts(log: string, maxBytes: number): LogCuts {
  const path = logCutsPath(log);
  const head = headBytes(maxBytes);
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
    const cuts = (statOrNull(log)?.size ?? 0) === 0 ? uncutLog(head) : unplacedCut(null, head);
    writeFileAtomic(path, encodeCuts(cuts));
    return cuts;
  }
  const found = decodeCuts(text);
  if (found !== null && !found.cutting) return found;
  const repaired = unplacedCut(found?.generation ?? null, head);
  writeCuts(path, repaired);
  return repaired;
}

/** A place in the log: the generation it belongs to and a byte offset in it. */
export interface LogCursor {
  generation: string;
  offset: number;
}

// What the log's record says now. Missing while the log is still empty: nothing is written, so nothing was cut.
// Missing beside bytes: an older shim writes the log and does not record its cuts. `unsettled`: a cut is under way,
// or the record was read while it was written (or could not be read).
export type SeenCuts = LogCuts | "unrecorded" | "unsettled";

export function cutsNow(log: string): SeenCuts {
  let text: string;
  try {
    text = readFileSync(logCutsPath(log), "utf8");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "ENOENT") return "unsettled";
    return (statOrNull(log)?.size ?? 0) > 0 ? "unrecorded" : uncutLog(0);
  }
  const cuts = decodeCuts(text);
  return cuts === null || cuts.cutting ? "unsettled" : cuts;
}

// Where an offset of an earlier generation is now. Every cut keeps the same head. What the last cut kept of the tail
// was all written after the cut before (a cut leaves half the cap and the next comes past the whole cap), so a cursor
// from before that has seen none of it: it goes on from the last cut's marker.
export function carryOffset(cursor: LogCursor, cuts: LogCuts): number {
  if (cursor.offset <= cuts.head) return cursor.offset;
  if (cursor.generation !== cuts.previous || cursor.offset < cuts.tailFrom) return cuts.head;
  return cuts.tailAt + Math.min(cursor.offset - cuts.tailFrom, cuts.tailBytes);
}

// The trainer appends to its log with O_APPEND, so the log can be cut under it: its next write still lands at the
// new end. A cut keeps the first and the last quarter of the cap, and is recorded as a new generation.
export function capLog(log: string, maxBytes: number): number {
  const fd = openSync(log, "r+");
  const path = logCutsPath(log);
  // What the record says once the log is closed; null: nothing to write.
  let after: LogCuts | null = null;
  try {
    const size = fstatSync(fd).size;
    if (size <= maxBytes) return 0;
    const before = repairedCuts(log, maxBytes);
    const keep = headBytes(maxBytes);
    const tail = Buffer.alloc(keep);
    const got = readSync(fd, tail, 0, keep, size - keep);
    const dropped = size - 2 * keep;
    const marker = Buffer.from(
      `\n[lora-worker: ${dropped} bytes of trainer output dropped here to keep this log under ${maxBytes} bytes]\n`,
    );
    const rest = Buffer.concat([marker, tail.subarray(0, got)]);
    writeCuts(path, { ...before, cutting: true });
    after = before;
    ftruncateSync(fd, keep);
    after = unplacedCut(before.generation, keep);
    writeSync(fd, rest, 0, rest.length, keep);
    after = {
      ...after,
      tailFrom: size - keep,
      tailAt: keep + marker.length,
      tailBytes: got,
    };
    return dropped;
  } finally {
    // Closed first: on a network filesystem the log's new bytes are then visible before the record says so.
    closeSync(fd);
    if (after !== null) writeCuts(path, after);
  }
}
