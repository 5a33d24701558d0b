import { closeSync, fstatSync, openSync, readSync } from "node:fs";

const CHUNK = 64 * 1024;
export const MAX_TAIL_BYTES = 4 * 1024 * 1024;

// Reads backwards from the end, so the cost follows the lines asked for, not the log's size.
export function tailLines(path: string, lines: number): string[] {
  let fd: number;
  try {
    fd = openSync(path, "r");
  } catch {
    return [];
  }
  try {
    return screenLines(readTail(fd, lines)).slice(-lines);
  } finally {
    closeSync(fd);
  }
}

function readTail(fd: number, lines: number): string {
  const size = fstatSync(fd).size;
  const chunks: Buffer[] = [];
  let pos = size;
  let newlines = 0;
  while (pos > 0 && newlines <= lines && size - pos < MAX_TAIL_BYTES) {
    const len = Math.min(CHUNK, pos);
    pos -= len;
    const buf = Buffer.alloc(len);
    readSync(fd, buf, 0, len, pos);
    chunks.unshift(buf);
    for (const byte of buf) if (byte === 10) newlines++;
  }
  const text = Buffer.concat(chunks).toString("utf8");
  // The first line is partial unless the read reached the start of the file.
  return pos > 0 ? dropPartial(text) : text;
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

// What a terminal shows: of a tqdm line redrawn with "\r", only the last drawing.
function screenLines(text: string): string[] {
  const lines = text.split("\n").map((line) => {
    const parts = line.split("\r").filter((p) => p !== "");
    return parts.at(-1) ?? "";
  });
  if (lines.at(-1) === "") lines.pop();
  return lines;
}
