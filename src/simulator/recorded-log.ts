// A recorded sd-scripts log, line by line, its tqdm bars read by progress/tqdm-bar.ts, and how the run
// must have ended. A log copied from a terminal keeps only the last redraw of each bar line, at times
// with stdout text glued after it; a raw log keeps every redraw on one physical line, "\r" before each,
// and each redraw is read as a line of its own, so that a replay draws them all.
import { parseTqdmBar, type TqdmBar } from "../progress/tqdm-bar.ts";

export interface RecordedLine {
  // The line without its newline.
  text: string;
  // False for a redraw that a later "\r" on the same line overwrites, and for an unterminated last line.
  newline: boolean;
  // True when a "\r" on the same physical line came before it: it is drawn over what was there.
  redraw: boolean;
  bar: RecordedBar | null;
}

// `meter` is the status line as tqdm drew it, up to its closing "]"; `after` the text glued after it.
export type RecordedBar = Pick<TqdmBar, "description" | "n" | "total"> & {
  meter: string;
  after: string;
  // tqdm's own clock; null where the line shows none.
  elapsedSeconds: number | null;
};

export type Ending = { kind: "exit"; code: number } | { kind: "save" };

// The elapsed MM:SS or H:MM:SS that opens tqdm's bracket: the replay's pace, which tqdm-bar.ts leaves out.
const ELAPSED = /\[(\d+(?::\d\d){1,2})[<,]/;
// Python's exit status for an uncaught exception, and for a script it cannot open or bad arguments.
const EXCEPTION_EXIT = 1;
const USAGE_EXIT = 2;
const TRACEBACK = "Traceback (most recent call last):";
const UNCAUGHT = /Traceback \(most recent call last\):|CUDA out of memory|OutOfMemoryError/;
// The last line of an uncaught exception: `RuntimeError: ...`, `torch.OutOfMemoryError: ...`.
const EXCEPTION_LINE = /^\W*[\w.]*(?:Error|Exception)(?::|$)/;
// The first rule whose evidence the log holds decides; a log that simply stops died without saying why.
const ENDINGS: ReadonlyArray<[evidence: (lines: RecordedLine[]) => boolean, ending: Ending]> = [
  [(lines) => anyLine(lines, /: can't open file .*\[Errno 2\]/), exit(USAGE_EXIT)],
  [(lines) => /^\S+: error: /.test(lastText(lines)), exit(USAGE_EXIT)],
  [(lines) => anyLine(lines, UNCAUGHT), exit(EXCEPTION_EXIT)],
  [(lines) => EXCEPTION_LINE.test(lastText(lines)), exit(EXCEPTION_EXIT)],
  // sd-scripts returns normally when it finds no images.
  [(lines) => anyLine(lines, /No data found/), exit(0)],
  [trainedToTheEnd, { kind: "save" }],
];
// Python's reports of exceptions it went on past: one in a `__del__`, a weakref or atexit callback
// (often at shutdown, after the model is saved), or one that ended a thread rather than the program.
const IGNORED_REPORT = /^Exception (?:ignored\b|in thread\b)/;
const FRAME = /^\s+\S/;
const CHAINED = /^(?:During handling of the above exception|The above exception was the direct cause)/;

export function parseRecordedLog(text: string): RecordedLine[] {
  if (text === "") return [];
  const texts = text.split("\n");
  const unterminated = texts.pop()!;
  const lines = texts.flatMap((line) => recordedLines(line, true));
  if (unterminated !== "") lines.push(...recordedLines(unterminated, false));
  return lines;
}

// The last `steps:` bar: how far training got.
export function lastStepsBar(lines: RecordedLine[]): RecordedBar | null {
  return lines.findLast((line) => line.bar?.description === "steps")?.bar ?? null;
}

// Exceptions Python reported and went on past are no evidence: the run did not end on them.
export function judgeEnding(lines: RecordedLine[]): Ending {
  const fatal = withoutIgnoredExceptions(lines);
  return ENDINGS.find(([evidence]) => evidence(fatal))?.[1] ?? exit(EXCEPTION_EXIT);
}

// One physical line: every non-empty "\r"-separated piece, only the last ending the line; the "\r" of a
// CRLF ends the line rather than redrawing it.
function recordedLines(raw: string, newline: boolean): RecordedLine[] {
  const pieces = raw.replace(/\r$/, "").split("\r");
  const drawn = pieces.flatMap((text, index) => (text === "" ? [] : [{ text, redraw: index > 0 }]));
  if (drawn.length === 0) return [{ text: "", newline, redraw: false, bar: null }];
  const ends = (index: number) => newline && index === drawn.length - 1;
  return drawn.map(({ text, redraw }, index) => ({ text, newline: ends(index), redraw, bar: recordedBar(text) }));
}

function recordedBar(line: string): RecordedBar | null {
  const bar = parseTqdmBar(line);
  if (bar === null) return null;
  // tqdm-bar.ts trims what follows the "]"; the replay must put back exactly what was there.
  const close = line.lastIndexOf("]", line.trimEnd().length - bar.trailing.length - 1) + 1;
  const meter = line.slice(0, close);
  const clock = ELAPSED.exec(meter)?.[1];
  const elapsedSeconds = clock?.split(":").reduce((seconds, part) => seconds * 60 + Number(part), 0) ?? null;
  return { meter, after: line.slice(close), description: bar.description, n: bar.n, total: bar.total, elapsedSeconds };
}

function exit(code: number): Ending {
  return { kind: "exit", code };
}

function anyLine(lines: RecordedLine[], pattern: RegExp): boolean {
  return lines.some((line) => pattern.test(line.text));
}

function lastText(lines: RecordedLine[]): string {
  return lines.findLast((line) => line.text.trim() !== "")?.text ?? "";
}

function trainedToTheEnd(lines: RecordedLine[]): boolean {
  const bar = lastStepsBar(lines);
  return bar !== null && bar.n === bar.total;
}

function withoutIgnoredExceptions(lines: RecordedLine[]): RecordedLine[] {
  const kept: RecordedLine[] = [];
  let index = 0;
  while (index < lines.length) {
    if (IGNORED_REPORT.test(lines[index]!.text)) index = reportEnd(lines, index + 1);
    else kept.push(lines[index++]!);
  }
  return kept;
}

// Just past a report: `Traceback ...:`, indented frames, the exception line at column 0, and for a chained
// exception a blank line, the chaining sentence, a blank line and the next traceback.
function reportEnd(lines: RecordedLine[], start: number): number {
  let index = start;
  for (;;) {
    if (lines[index]?.text === TRACEBACK) {
      index += 1;
      while (index < lines.length && FRAME.test(lines[index]!.text)) index += 1;
    }
    if (index < lines.length) index += 1;
    const chained = CHAINED.test(lines[index + 1]?.text ?? "") && lines[index + 3]?.text === TRACEBACK;
    if (lines[index]?.text !== "" || !chained) return index;
    index += 3;
  }
}
