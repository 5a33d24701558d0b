// tqdm's status line (`tqdm.format_meter`) in its default format. Written to a file, tqdm cannot
// size a terminal, so the bar is 10 cells: `steps:  10%|█         | 40/400 [00:06<00:54,  6.60it/s, avr_loss=0.0871]`.
import { pyFixed, pyFloatStr, pyFormatG } from "./python-format.ts";

export interface Meter {
  description: string;
  n: number;
  total: number;
  elapsedSeconds: number;
  postfix: Record<string, number>;
}

const BAR_CELLS = 10;
const BAR_SYMBOLS = " ▏▎▍▌▋▊▉█";

export function formatMeter(meter: Meter): string {
  const { description, n, total, elapsedSeconds } = meter;
  const rate = elapsedSeconds > 0 ? n / elapsedSeconds : 0;
  const prefix = description === "" ? "" : `${description}: `;
  const status = `${formatRate(rate)}${formatPostfix(meter.postfix)}`;
  if (total === 0) return `${prefix}${n}it [${formatInterval(elapsedSeconds)}, ${status}]`;
  const remaining = rate > 0 ? formatInterval((total - n) / rate) : "?";
  const fraction = Math.min(1, Math.max(0, n / total));
  const percent = pyFixed(fraction * 100, 0).padStart(3);
  return `${prefix}${percent}%|${drawBar(fraction)}| ${n}/${total} [${formatInterval(elapsedSeconds)}<${remaining}, ${status}]`;
}

// tqdm flips to seconds per iteration once an iteration takes longer than a second.
function formatRate(rate: number): string {
  if (rate === 0) return "?it/s";
  if (1 / rate > 1) return `${pyFixed(1 / rate, 2).padStart(5)}s/it`;
  return `${pyFixed(rate, 2).padStart(5)}it/s`;
}

function formatInterval(seconds: number): string {
  const whole = Math.trunc(seconds);
  const [hours, minutes, secs] = [Math.floor(whole / 3600), Math.floor(whole / 60) % 60, whole % 60];
  const tail = `${pad2(minutes)}:${pad2(secs)}`;
  return hours > 0 ? `${hours}:${tail}` : tail;
}

function formatPostfix(postfix: Record<string, number>): string {
  const parts = Object.entries(postfix).map(([key, value]) => `${key}=${formatNumber(value)}`);
  return parts.length === 0 ? "" : `, ${parts.join(", ")}`;
}

// tqdm.format_num: three significant digits unless str() is shorter.
function formatNumber(value: number): string {
  const short = pyFormatG(value, 3).replace("+0", "+").replace("-0", "-");
  const plain = pyFloatStr(value);
  return short.length < plain.length ? short : plain;
}

function drawBar(fraction: number): string {
  const steps = BAR_SYMBOLS.length - 1;
  const eighths = Math.trunc(fraction * BAR_CELLS * steps);
  const full = Math.floor(eighths / steps);
  if (full >= BAR_CELLS) return BAR_SYMBOLS.at(-1)!.repeat(BAR_CELLS);
  return BAR_SYMBOLS.at(-1)!.repeat(full) + BAR_SYMBOLS[eighths % steps] + " ".repeat(BAR_CELLS - full - 1);
}

function pad2(value: number): string {
  return String(value).padStart(2, "0");
}
