// A recorded sd-scripts log, line by line, with tqdm's status lines picked out. A log copied from a
// terminal keeps only the last redraw of each bar line, at times with stdout text glued after it (the
// bar was still open when the text was printed); a raw log keeps every redraw, "\r" before each, and
// is read as a terminal shows it: each line from its last "\r" on.
import { readFile } from "node:fs/promises";

export interface RecordedLine {
  // The line without its newline.
  text: string;
  // False only for a last line that the log leaves unterminated.
  newline: boolean;
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
  const lines = texts.map((line) => recordedLine(line, true));
  if (unterminated !== "") lines.push(recordedLine(unterminated, false));
  return lines;
}

// The last `steps:` bar: how far training got.
export function lastStepsBar(lines: RecordedLine[]): RecordedBar | null {
  return lines.findLast((line) => line.bar?.description === "steps")?.bar ?? null;
}

function recordedLine(raw: string, newline: boolean): RecordedLine {
  const line = raw.replace(CRLF_CR, "");
  const text = line.slice(line.lastIndexOf("\r") + 1);
  return { text, newline, bar: parseBar(text) };
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
