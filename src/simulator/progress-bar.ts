// A tqdm bar as sd-scripts drives it, on stderr: each redraw is "\r" + the whole line, padded with
// spaces over a longer previous line, and no "\n" until close().
import type { Io } from "./io.ts";
import { formatMeter } from "./tqdm.ts";

// tqdm's mininterval: update() redraws at most this often; set_postfix() always redraws.
const MIN_INTERVAL_SECONDS = 0.1;

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
    const elapsedSeconds = this.io.now() - this.startedAt;
    const { description, n, total, postfix } = this;
    const line = formatMeter({ description, n, total, postfix, elapsedSeconds });
    this.io.stderr(`\r${line}${" ".repeat(Math.max(0, this.lastLength - line.length))}`);
    this.lastLength = line.length;
  }
}

// A bar over `total` items that takes `seconds` in all, like sd-scripts' caching loops.
export async function tickThrough(io: Io, description: string, total: number, seconds: number): Promise<void> {
  const bar = new ProgressBar(io, description, total);
  for (let item = 0; item < total; item += 1) {
    await io.sleep(seconds / total);
    bar.update();
  }
  bar.close();
}
