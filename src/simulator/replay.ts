// Replaying a recorded sd-scripts log instead of simulating a run. A log copied from a terminal keeps only the
// last redraw of each bar line, at times with stdout text glued after it; a raw log keeps every redraw on one
// physical line, "\r" before each, and each redraw is read as a line of its own, its bar by progress/progress.ts.
// The replay keeps a live run's framing: plain lines on stdout; each tqdm line on stderr as the redraw it
// records, "\r" + the meter and no newline of its own, then the log's "\n" (on stdout when stdout text was glued
// after the bar). `steps:` bars keep the log's own pace, tqdm's elapsed time divided by the speed; other lines
// print at once. Then the run ends as its log says it must have (judgeEnding).
import { readFile } from "node:fs/promises";
import { parseTqdmBar, type TqdmBar } from "../progress/progress.ts";
import { fail, ok, type Result } from "../result.ts";
import { finalLoraPath, writeLoraFile } from "./checkpoint.ts";
import { EXCEPTION_EXIT, print, TRACEBACK, USAGE_EXIT, type Trainer } from "./io.ts";
import { REPLAY_LOG, type Knobs } from "./knobs.ts";

export interface RecordedLine {
  /** The line without its newline. */
  text: string;
  /** False for a redraw that a later "\r" on the same line overwrites, and for an unterminated last line. */
  newline: boolean;
  /** True when a "\r" on the same physical line came before it: it is drawn over what was there. */
  redraw: boolean;
  bar: RecordedBar | null;
}

// `meter` is the status line as tqdm drew it, up to its closing "]"; `after` the text glued after it.
type RecordedBar = Pick<TqdmBar, "description" | "n" | "total"> & {
  meter: string;
  after: string;
  // tqdm's own clock; null where the line shows none.
  elapsedSeconds: number | null;
};

type Ending = { kind: "exit"; code: number } | { kind: "save" };

const MODEL_SAVED = "model saved.";
// The elapsed MM:SS or H:MM:SS that opens tqdm's bracket: the replay's pace, which progress.ts leaves out.
const ELAPSED = /\[(\d+(?::\d\d){1,2})[<,]/;
const UNCAUGHT = /Traceback \(most recent call last\):|CUDA out of memory|OutOfMemoryError/;
// The last line of an uncaught exception: `RuntimeError: ...`, `torch.OutOfMemoryError: ...`.
const EXCEPTION_LINE = /^\W*[\w.]*(?:Error|Exception)(?::|$)/;
// The first rule whose evidence the log holds decides; a log that simply stops died without saying why.
const ENDINGS: ReadonlyArray<[evidence: (lines: RecordedLine[]) => boolean, ending: Ending]> = [
  [(lines) => anyLine(lines, /: can't open file .*\[Errno 2\]/), { kind: "exit", code: USAGE_EXIT }],
  [(lines) => /^\S+: error: /.test(lastText(lines)), { kind: "exit", code: USAGE_EXIT }],
  [(lines) => anyLine(lines, UNCAUGHT), { kind: "exit", code: EXCEPTION_EXIT }],
  [(lines) => EXCEPTION_LINE.test(lastText(lines)), { kind: "exit", code: EXCEPTION_EXIT }],
  // sd-scripts returns normally when it finds no images.
  [(lines) => anyLine(lines, /No data found/), { kind: "exit", code: 0 }],
  [trainedToTheEnd, { kind: "save" }],
];
// Python's reports of exceptions it went on past: one in a `__del__`, a weakref or atexit callback
// (often at shutdown, after the model is saved), or one that ended a thread rather than the program.
const IGNORED_REPORT = /^Exception (?:ignored\b|in thread\b)/;
const FRAME = /^\s+\S/;
const CHAINED = /^(?:During handling of the above exception|The above exception was the direct cause)/;

// The recorded log the knobs name, null when there is none, or why it cannot be read.
export async function readRecordedLog(replay: Knobs["replay"]): Promise<Result<RecordedLine[] | null>> {
  if (replay === null) return ok(null);
  const text = await readFile(replay.logPath, "utf8").catch((error: Error) => error);
  return typeof text === "string" ? ok(parseRecordedLog(text)) : fail(`${REPLAY_LOG}: ${text.message}`);
}

export function parseRecordedLog(text: string): RecordedLine[] {
  const texts = text.split("\n");
  const unterminated = texts.pop()!;
  const lines = texts.flatMap((line) => recordedLines(line, true));
  if (unterminated !== "") lines.push(...recordedLines(unterminated, false));
  return lines;
}

// Exceptions Python reported and went on past are no evidence: the run did not end on them.
export function judgeEnding(lines: RecordedLine[]): Ending {
  const fatal = withoutIgnoredExceptions(lines);
  return ENDINGS.find(([evidence]) => evidence(fatal))?.[1] ?? { kind: "exit", code: EXCEPTION_EXIT };
}

// Resolves to the exit code the Python process would have had.
export async function replayRun(trainer: Trainer, lines: RecordedLine[]): Promise<number> {
  await play(trainer, lines);
  const ending = judgeEnding(lines);
  if (ending.kind === "exit") return ending.code;
  // The file is always written where the worker expects it; the lines only where the log lacks them.
  const { io, args, outputDir } = trainer;
  const announced = lines.some((line) => line.text.includes(MODEL_SAVED));
  const path = finalLoraPath(outputDir, args.output_name);
  if (!announced) print(io, `saving checkpoint: ${path}`);
  // A recording's own plan and captions are not carried over: only the step count.
  const steps = lastStepsBar(lines)?.n ?? 0;
  const plan = { trainImages: 0, batchesPerEpoch: steps, epochs: 1, totalSteps: steps, tagFrequency: {} };
  await writeLoraFile(trainer, path, plan, steps, 1);
  if (!announced) print(io, MODEL_SAVED);
  return 0;
}

async function play({ io, knobs }: Trainer, lines: RecordedLine[]): Promise<void> {
  const speed = knobs.replay?.speed ?? 1;
  const start = io.now();
  let step = 0;
  for (const { text, newline, redraw, bar } of lines) {
    const end = newline ? "\n" : "";
    if (bar === null) {
      io.stdout(`${redraw ? "\r" : ""}${text}${end}`);
      continue;
    }
    if (bar.description === "steps") {
      if (bar.elapsedSeconds !== null) await io.sleep(Math.max(0, start + bar.elapsedSeconds / speed - io.now()));
      // Strays planned for the steps the log has just gone past.
      for (const strike of knobs.failures.strikes) {
        if (strike.kind !== "orphan" || strike.step <= step || strike.step > bar.n) continue;
        io.spawnStray(strike.escapeGroup, knobs.failures.ignoreSigterm);
      }
      step = Math.max(step, bar.n);
    }
    io.stderr(`\r${bar.meter}`);
    if (bar.after === "") io.stderr(end);
    else io.stdout(`${bar.after}${end}`);
  }
}

// The last `steps:` bar: how far training got.
function lastStepsBar(lines: RecordedLine[]): RecordedBar | null {
  return lines.findLast((line) => line.bar?.description === "steps")?.bar ?? null;
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
  // progress.ts trims what follows the "]"; the replay must put back exactly what was there.
  const close = line.lastIndexOf("]", line.trimEnd().length - bar.trailing.length - 1) + 1;
  const meter = line.slice(0, close);
  const clock = ELAPSED.exec(meter)?.[1];
  const elapsedSeconds = clock?.split(":").reduce((seconds, part) => seconds * 60 + Number(part), 0) ?? null;
  return { meter, after: line.slice(close), description: bar.description, n: bar.n, total: bar.total, elapsedSeconds };
}

function trainedToTheEnd(lines: RecordedLine[]): boolean {
  const bar = lastStepsBar(lines);
  return bar !== null && bar.n === bar.total;
}

function anyLine(lines: RecordedLine[], pattern: RegExp): boolean {
  return lines.some((line) => pattern.test(line.text));
}

function lastText(lines: RecordedLine[]): string {
  return lines.findLast((line) => line.text.trim() !== "")?.text ?? "";
}

// A report: its header, then tracebacks with their indented frames, up to the exception line at column 0 that
// ends it unless a blank line and a chaining sentence follow.
function withoutIgnoredExceptions(lines: RecordedLine[]): RecordedLine[] {
  let inReport = false;
  return lines.filter(({ text }, index) => {
    if (IGNORED_REPORT.test(text)) inReport = true;
    else if (!inReport) return true;
    else if (text !== TRACEBACK && text !== "" && !FRAME.test(text) && !CHAINED.test(text)) {
      inReport = CHAINED.test(lines[index + 2]?.text ?? "");
    }
    return false;
  });
}
