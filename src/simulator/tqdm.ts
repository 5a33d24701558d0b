// A tqdm bar as sd-scripts drives it, on stderr: each redraw is "\r" + the whole status line, padded
// with spaces over a longer previous one, and no "\n" until close(). Written to a file, tqdm cannot size
// a terminal, so the bar is 10 cells: `steps:  10%|█         | 40/400 [00:06<00:54,  6.60it/s, avr_loss=0.0871]`.
// progress/progress.ts reads these lines back. A bar opened while another is open takes the next
// position: each redraw goes one line down ("\n"), then back up (ESC [A). With leave=False, close()
// blanks the bar instead of ending its line.
import type { Io } from "./io.ts";

export type BarPlace = { position: number; leave: boolean };

// tqdm's mininterval: update() redraws at most this often; set_postfix(avr_loss=...) always redraws.
const MIN_INTERVAL_SECONDS = 0.1;
const BAR_CELLS = 10;
const BAR_SYMBOLS = " ▏▎▍▌▋▊▉█";
const CURSOR_UP = "\x1b[A";

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
    private readonly place: BarPlace = { position: 0, leave: true },
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

  close(): void {
    if (!this.place.leave) {
      this.print("");
      if (this.place.position === 0) this.io.stderr("\r");
      return;
    }
    this.draw();
    this.io.stderr("\n");
  }

  private draw(): void {
    this.print(this.meter(this.io.now() - this.startedAt));
  }

  private print(line: string): void {
    const [down, up] = ["\n".repeat(this.place.position), CURSOR_UP.repeat(this.place.position)];
    this.io.stderr(`${down}\r${line}${" ".repeat(Math.max(0, this.lastLength - line.length))}${up}`);
    this.lastLength = line.length;
  }

  // tqdm.format_meter in its default format.
  private meter(elapsed: number): string {
    const { description, n, total } = this;
    const rate = elapsed > 0 ? n / elapsed : 0;
    const prefix = description === "" ? "" : `${description}: `;
    const status = `${formatRate(rate)}${this.loss === null ? "" : `, avr_loss=${formatNumber(this.loss)}`}`;
    if (total === 0) return `${prefix}${n}it [${formatInterval(elapsed)}, ${status}]`;
    const remaining = rate > 0 ? formatInterval((total - n) / rate) : "?";
    const fraction = Math.min(1, Math.max(0, n / total));
    const percent = (fraction * 100).toFixed(0).padStart(3);
    const times = `${formatInterval(elapsed)}<${remaining}`;
    return `${prefix}${percent}%|${drawBar(fraction)}| ${n}/${total} [${times}, ${status}]`;
  }
}

// A bar over `total` items that takes `seconds` in all, like sd-scripts' caching loops.
export async function tickThrough(io: Io, total: number, seconds: number, place?: BarPlace): Promise<void> {
  const bar = new ProgressBar(io, "", total, place);
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
