// A tqdm bar as sd-scripts drives it, on stderr: each redraw is "\r" + the whole status line, padded
// with spaces over a longer previous one, and no "\n" until close(). Written to a file, tqdm cannot size
// a terminal, so the bar is 10 cells: `steps:  10%|█         | 40/400 [00:06<00:54,  6.60it/s, avr_loss=0.0871]`.
// progress/tqdm-bar.ts reads these lines back.
import type { Io } from "./io.ts";

// tqdm's mininterval: update() redraws at most this often; set_postfix() always redraws.
const MIN_INTERVAL_SECONDS = 0.1;
const BAR_CELLS = 10;
const BAR_SYMBOLS = " ▏▎▍▌▋▊▉█";

export class ProgressBar {
  private n = 0;
  private postfix: Record<string, number> = {};
  private readonly startedAt: number;
  private lastUpdateDraw: number;
  private lastLength = 0;

  constructor(
    private readonly io: Io,
    private readonly description: string,
    private readonly total: number,
  ) {
    this.startedAt = io.now();
    this.lastUpdateDraw = this.startedAt;
    this.draw();
  }

  update(): void {
    this.n += 1;
    if (this.io.now() - this.lastUpdateDraw < MIN_INTERVAL_SECONDS) return;
    this.draw();
    this.lastUpdateDraw = this.io.now();
  }

  setPostfix(postfix: Record<string, number>): void {
    this.postfix = postfix;
    this.draw();
  }

  close(): void {
    this.draw();
    this.io.stderr("\n");
  }

  private draw(): void {
    const line = this.meter(this.io.now() - this.startedAt);
    this.io.stderr(`\r${line}${" ".repeat(Math.max(0, this.lastLength - line.length))}`);
    this.lastLength = line.length;
  }

  // tqdm.format_meter in its default format.
  private meter(elapsed: number): string {
    const { description, n, total } = this;
    const rate = elapsed > 0 ? n / elapsed : 0;
    const prefix = description === "" ? "" : `${description}: `;
    const values = Object.entries(this.postfix).map(([key, value]) => `, ${key}=${formatNumber(value)}`);
    const status = `${formatRate(rate)}${values.join("")}`;
    if (total === 0) return `${prefix}${n}it [${formatInterval(elapsed)}, ${status}]`;
    const remaining = rate > 0 ? formatInterval((total - n) / rate) : "?";
    const fraction = Math.min(1, Math.max(0, n / total));
    const percent = (fraction * 100).toFixed(0).padStart(3);
    const times = `${formatInterval(elapsed)}<${remaining}`;
    return `${prefix}${percent}%|${drawBar(fraction)}| ${n}/${total} [${times}, ${status}]`;
  }
}

// A bar over `total` items that takes `seconds` in all, like sd-scripts' caching loops.
export async function tickThrough(io: Io, total: number, seconds: number): Promise<void> {
  const bar = new ProgressBar(io, "", total);
  for (let item = 0; item < total; item += 1) {
    await io.sleep(seconds / total);
    bar.update();
  }
  bar.close();
}

// tqdm flips to seconds per iteration once an iteration takes longer than a second.
function formatRate(rate: number): string {
  if (rate === 0) return "?it/s";
  return rate < 1 ? `${(1 / rate).toFixed(2).padStart(5)}s/it` : `${rate.toFixed(2).padStart(5)}it/s`;
}

function formatInterval(seconds: number): string {
  const whole = Math.trunc(seconds);
  const two = (value: number) => String(value).padStart(2, "0");
  const tail = `${two(Math.floor(whole / 60) % 60)}:${two(whole % 60)}`;
  return whole >= 3600 ? `${Math.floor(whole / 3600)}:${tail}` : tail;
}

// tqdm.format_num: three significant digits, as Python prints them ("nan", not "NaN").
function formatNumber(value: number): string {
  return Number.isNaN(value) ? "nan" : String(Number(value.toPrecision(3)));
}

function drawBar(fraction: number): string {
  const steps = BAR_SYMBOLS.length - 1;
  const eighths = Math.trunc(fraction * BAR_CELLS * steps);
  const full = Math.floor(eighths / steps);
  if (full >= BAR_CELLS) return BAR_SYMBOLS.at(-1)!.repeat(BAR_CELLS);
  return BAR_SYMBOLS.at(-1)!.repeat(full) + BAR_SYMBOLS[eighths % steps] + " ".repeat(BAR_CELLS - full - 1);
}
