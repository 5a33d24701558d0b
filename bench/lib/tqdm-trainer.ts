// Stands in for `accelerate launch …` where a benchmark needs a trainer paced exactly. It prints sd-scripts'
// `steps:` tqdm bar on stderr the way tqdm does (each redraw "\r" + the whole line, no "\n") and ignores the
// launch argv the worker appends after "--". The bar's total is the fast tier's step count, since a bar with
// another total (or one counting past it) is kept in the log but is not progress.
//   --rate N --seconds S             N redraws a second for S seconds, the step advancing evenly to the total,
//                                    then exit 0
//   --stamps FILE --count N --min-ms A --max-ms B
//                                    N steps at random A–B ms intervals; before each redraw is written,
//                                    "<step> <epoch ms>" is appended to FILE (the moment the update left)
import { appendFileSync, writeSync } from "node:fs";
import { TIERS } from "../../src/tiers.ts";

const STDERR = 2;
const TICK_MS = 10;
const BAR_WIDTH = 10;
const TOTAL = TIERS.fast.maxTrainSteps;

export function tqdmLine(n: number, total: number, elapsedS: number, secondsPerIt: number): string {
  const filled = Math.floor((BAR_WIDTH * n) / total);
  const bar = "█".repeat(filled) + " ".repeat(BAR_WIDTH - filled);
  const pct = String(Math.floor((100 * n) / total)).padStart(3);
  const rate = secondsPerIt >= 1 ? `${secondsPerIt.toFixed(2)}s/it` : `${(1 / secondsPerIt).toFixed(2)}it/s`;
  const loss = (0.08 + 0.02 * Math.sin(n / 50)).toFixed(4);
  return `\rsteps: ${pct}%|${bar}| ${n}/${total} [${clock(elapsedS)}<${clock(((total - n) * secondsPerIt))}, ${rate}, avr_loss=${loss}]`;
}

function clock(seconds: number): string {
  const s = Math.floor(seconds);
  return `${String(Math.floor(s / 60)).padStart(2, "0")}:${String(s % 60).padStart(2, "0")}`;
}

export const epochMs = (): number => performance.timeOrigin + performance.now();

async function flood(rate: number, seconds: number): Promise<void> {
  const redraws = Math.ceil(rate * seconds);
  const start = performance.now();
  let written = 0;
  while (written < redraws) {
    const elapsedS = (performance.now() - start) / 1000;
    const due = Math.min(redraws, Math.floor(elapsedS * rate));
    let chunk = "";
    for (; written < due; written++) chunk += tqdmLine(1 + Math.floor((written * (TOTAL - 1)) / redraws), TOTAL, elapsedS, seconds / TOTAL);
    if (chunk !== "") writeSync(STDERR, chunk);
    await Bun.sleep(TICK_MS);
  }
}

async function stamped(file: string, count: number, minMs: number, maxMs: number): Promise<void> {
  if (count > TOTAL) throw new Error(`--count ${count} is past the bar's total of ${TOTAL}`);
  const start = performance.now();
  for (let n = 1; n <= count; n++) {
    await Bun.sleep(minMs + Math.random() * (maxMs - minMs));
    const line = tqdmLine(n, TOTAL, (performance.now() - start) / 1000, (minMs + maxMs) / 2000);
    appendFileSync(file, `${n} ${epochMs()}\n`);
    writeSync(STDERR, line);
  }
}

if (import.meta.main) {
  const own = process.argv.slice(2, process.argv.indexOf("--") < 0 ? undefined : process.argv.indexOf("--"));
  const arg = (name: string) => own[own.indexOf(`--${name}`) + 1] ?? "";
  if (own.includes("--stamps")) await stamped(arg("stamps"), Number(arg("count")), Number(arg("min-ms")), Number(arg("max-ms")));
  else await flood(Number(arg("rate")), Number(arg("seconds")));
  writeSync(STDERR, "\n");
  process.exit(0);
}
