// A tqdm bar as sd-scripts drives it, on stderr: each redraw is "\r" + the whole status line, padded
// with spaces over a longer previous one, and no "\n" until close(). Written to a file, tqdm cannot size
// a terminal, so the bar is 10 cells: `steps:  10%|█         | 40/400 [00:06<00:54,  6.60it/s, avr_loss=0.0871]`.
// progress/progress.ts reads these lines back. A bar nested under another (tqdm position 1: the sampler's, under
// the steps bar) draws one line down and moves back up: "\n\r" + the line + ESC[A. tqdm's partial cells are left
// out: nothing reads them.
import type { Io } from "./io.ts";

// tqdm's mininterval: update() redraws at most this often; set_postfix(avr_loss=...) always redraws.
const MIN_INTERVAL_SECONDS = 0.1;
const BAR_CELLS = 10;
// The cursor up one line.
const UP = "\x1b[A";

export class ProgressBar {
  private n = 0;
  private loss: number | null = null;
  private startedAt: number;
  private lastUpdateDraw: number;
  private lastLength = 0;

  constructor(
    private readonly io: Io,
    private readonly description: string,
    private readonly total: number,
    private readonly nested = false,
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

  setLoss(loss: number): void {
    this.loss = loss;
    this.draw();
  }

  // Restarts the clock from the last update's redraw, so the time since then counts for nothing.
  unpause(): void {
    this.startedAt += this.io.now() - this.lastUpdateDraw;
    this.lastUpdateDraw = this.io.now();
  }

  // A nested bar leaves its line blank, as tqdm's leave=False does for a bar at position 1.
  close(): void {
    this.draw();
    this.io.stderr(this.nested ? `\n\r${" ".repeat(this.lastLength)}${UP}` : "\n");
  }

  // tqdm.format_meter in its default format.
  private draw(): void {
    const { description, n, total } = this;
    const elapsed = this.io.now() - this.startedAt;
    const rate = elapsed > 0 ? n / elapsed : 0;
    const fraction = total > 0 ? Math.min(1, n / total) : 1;
    const cells = "█".repeat(Math.trunc(fraction * BAR_CELLS)).padEnd(BAR_CELLS);
    const remaining = rate > 0 ? formatInterval((total - n) / rate) : "?";
    const loss = this.loss === null ? "" : `, avr_loss=${formatNumber(this.loss)}`;
    const status = `${formatInterval(elapsed)}<${remaining}, ${formatRate(rate)}${loss}`;
    const prefix = description === "" ? "" : `${description}: `;
    const line = `${prefix}${(fraction * 100).toFixed(0).padStart(3)}%|${cells}| ${n}/${total} [${status}]`;
    const padded = `\r${line}${" ".repeat(Math.max(0, this.lastLength - line.length))}`;
    this.io.stderr(this.nested ? `\n${padded}${UP}` : padded);
    this.lastLength = line.length;
  }
}

// A bar over `total` items that takes `seconds` in all, like sd-scripts' caching loops and its sampler's.
export async function tickThrough(io: Io, total: number, seconds: number, nested = false): Promise<void> {
  const bar = new ProgressBar(io, "", total, nested);
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
