// A recorded sd-scripts log, line by line, with tqdm's status lines picked out. A log copied from a
// terminal keeps only the last redraw of each bar line, at times with stdout text glued after it (the
// bar was still open when the text was printed); a raw log keeps every redraw on one physical line,
// "\r" before each, and each redraw is read as a line of its own, so that a replay draws them all.
import { readFile } from "node:fs/promises";

export interface RecordedLine {
  // The line without its newline.
  text: string;
  // False for a redraw that a later "\r" on the same physical line overwrites, and for a last line
  // that the log leaves unterminated.
  newline: boolean;
  // True when a "\r" on the same physical line came before it: it is drawn over what was there.
  redraw: boolean;
  bar: RecordedBar | null;
}

export interface RecordedBar {
  // The status line as tqdm drew it, up to its closing "]".
  meter: string;
  description: string;
  n: number;
  total: number;
  // tqdm's own clock; null where the line shows none.
  elapsedSeconds: number | null;
  // Text on the same line after the bar.
  after: string;
}

export type RecordedLogLoad = { ok: true; lines: RecordedLine[] } | { ok: false; message: string };

// `desc: NNN%|bar| n/total [elapsed<remaining, rate, postfix]`; Colab-style output drops the bar.
const METER = /^(?:(?<description>[^|[\]]*?): )?\s*\d{1,3}%(?:\|[^|]*\| | )(?<n>\d+)\/(?<total>\d+) \[(?<times>[^\]]*)\]/;
// tqdm's format_interval: MM:SS, or H:MM:SS from an hour on.
const ELAPSED = /^(?:(\d+):)?(\d+):(\d\d)(?=[<,])/;
// The "\r" of a CRLF line ending, which ends the line rather than redrawing it.
const CRLF_CR = /\r$/;

export async function loadRecordedLog(path: string): Promise<RecordedLogLoad> {
  try {
    return { ok: true, lines: parseRecordedLog(await readFile(path, "utf8")) };
  } catch (error) {
    return { ok: false, message: (error as Error).message };
  }
}

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

// One physical line: every non-empty "\r"-separated piece of it, only the last ending the line.
function recordedLines(raw: string, newline: boolean): RecordedLine[] {
  const pieces = raw.replace(CRLF_CR, "").split("\r");
  const drawn = pieces.flatMap((text, index) => (text === "" ? [] : [{ text, redraw: index > 0 }]));
  if (drawn.length === 0) return [{ text: "", newline, redraw: false, bar: null }];
  return drawn.map(({ text, redraw }, index) => ({ text, newline: newline && index === drawn.length - 1, redraw, bar: parseBar(text) }));
}

function parseBar(line: string): RecordedBar | null {
  const match = METER.exec(line);
  if (match?.groups === undefined) return null;
  const { description = "", n = "", total = "", times = "" } = match.groups;
  const meter = match[0];
  return { meter, description, n: Number(n), total: Number(total), elapsedSeconds: elapsed(times), after: line.slice(meter.length) };
}

function elapsed(times: string): number | null {
  const match = ELAPSED.exec(times);
  if (match === null) return null;
  const [, hours = "0", minutes = "", seconds = ""] = match;
  return Number(hours) * 3600 + Number(minutes) * 60 + Number(seconds);
}
