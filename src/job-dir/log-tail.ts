import { closeSync, fstatSync, openSync, readSync } from "node:fs";
import { screenLine } from "../progress/progress.ts";

// train.log's last lines, for GET /train/{id}/log, the CLI's follow and the outcome: read backwards from its end.

/** The most of the log a tail reads, however many lines are asked for. */
export const MAX_TAIL_BYTES = 4 * 1024 * 1024;
const READ_CHUNK = 64 * 1024;

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
