// Reports of exceptions that Python printed but did not let end the process: one raised in a
// `__del__` or a weakref callback (often at interpreter shutdown, after the run has saved its model)
// and one that ended a thread rather than the program. CPython prints a header line, then the
// traceback: `Traceback (most recent call last):`, indented frames, the exception line at column 0,
// and, for a chained exception, a blank line, the chaining sentence, a blank line and the next one.
import type { RecordedLine } from "./recorded-log.ts";

// `Exception ignored in: <function X.__del__ at 0x…>`, `Exception ignored while calling deallocator …`
// (Python 3.14), `Exception ignored in atexit callback: …`, `Exception in thread Thread-1 (run):`.
const REPORT_HEAD = /^Exception (?:ignored\b|in thread\b)/;
const TRACEBACK_HEAD = "Traceback (most recent call last):";
// Frames, their source lines and the carets under them are indented.
const FRAME = /^\s+\S/;
const CHAINED = /^(?:During handling of the above exception|The above exception was the direct cause)/;

// The log as the run's own fate reads it: without what Python reported and went on past.
export function withoutIgnoredExceptions(lines: RecordedLine[]): RecordedLine[] {
  const kept: RecordedLine[] = [];
  let index = 0;
  while (index < lines.length) {
    if (REPORT_HEAD.test(lines[index]!.text)) index = reportEnd(lines, index + 1);
    else kept.push(lines[index++]!);
  }
  return kept;
}

// The index just past the report whose header came before `start`.
function reportEnd(lines: RecordedLine[], start: number): number {
  let index = start;
  for (;;) {
    if (lines[index]?.text === TRACEBACK_HEAD) index = skipFrames(lines, index + 1);
    if (index < lines.length) index += 1;
    if (!chainedAt(lines, index)) return index;
    index += 3;
  }
}

function skipFrames(lines: RecordedLine[], start: number): number {
  let index = start;
  while (index < lines.length && FRAME.test(lines[index]!.text)) index += 1;
  return index;
}

// A blank line, the chaining sentence, a blank line, then the next traceback.
function chainedAt(lines: RecordedLine[], index: number): boolean {
  return lines[index]?.text === "" && CHAINED.test(lines[index + 1]?.text ?? "") && lines[index + 3]?.text === TRACEBACK_HEAD;
}
