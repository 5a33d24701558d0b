// Issue 41 §1-2: the compiled worker while it prepares a hostile upload. /healthz is probed on a fixed schedule
// (each latency from the probe's due moment, so a stall counts for every probe it delays) from the POST until the
// job leaves `preparing`, while the worker counts the CLIP tokens of three captions of one word each (64,000,
// 7,000 and 64,000 letters)
// (CLIP's tokenizer in place). Then a cancel is timed while the worker turns a 6000 x 6000 photo stored with EXIF
// orientation 6. Baseline: the same probes to the same worker with no job. `BENCH_BEFORE=<binary>` adds an older
// build (the one before the change took 20-27 s a caption, and kept a cancel waiting for the turn).
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { solidPng } from "../src/png.ts";
import { pngWithOrientation } from "../test/support/exif.ts";
import { writeTokenizers } from "../test/support/tokenizers.ts";
import { type BenchWorker, isTerminal, startBenchWorker } from "./lib/bench-host.ts";
import { builds, runBench, verdict, type Row } from "./lib/report.ts";
import { ms, summarize } from "./lib/stats.ts";
import { randomLetters } from "../test/support/random-letters.ts";

const PROBE_EVERY_MS = 10;
const IDLE_MS = 2000;
const WORD_LETTERS = 64_000;
// Short enough that only merging it shows it passes 225 tokens (a token spans at most 32 bytes).
const SHORTER_LETTERS = 7_000;
const PHOTO_SIDE = 6000;
const TARGET_MS = 1000;

const tables = () => ({ trainer: { mode: "simulate", cancel_grace_seconds: 2 }, simulate: { seconds_per_step: 0.002 } });

// One probe every PROBE_EVERY_MS until `done()`; each latency from its scheduled moment to its answer.
export async function probe(host: BenchWorker, done: () => boolean): Promise<number[]> {
  const samples: number[] = [];
  const inFlight: Promise<void>[] = [];
  const start = performance.now();
  for (let i = 0; !done(); i++) {
    const due = start + i * PROBE_EVERY_MS;
    const wait = due - performance.now();
    if (wait > 0) await Bun.sleep(wait);
    inFlight.push(host.get("/healthz").then(async (res) => {
      await res.arrayBuffer();
      samples.push(performance.now() - due);
    }));
  }
  await Promise.all(inFlight);
  return samples;
}

// Polls the job's record until `done` holds for it; returns it.
async function until(host: BenchWorker, id: string, done: (job: Record<string, any>) => boolean) {
  for (;;) {
    const job = await host.job(id);
    if (done(job)) return job;
    await Bun.sleep(20);
  }
}

async function captionsRound(binary: string | undefined) {
  await using host = await startBenchWorker({ binary, tables });
  writeTokenizers(join(host.tree.state, "tokenizers"));
  // Letters without a pattern, as the issue's: a repeating word merges quickly even in the quadratic loop.
  const word = (n: number) => randomLetters(n);
  for (const [i, letters] of [[0, WORD_LETTERS], [1, SHORTER_LETTERS], [2, WORD_LETTERS]]) {
    writeFileSync(join(host.tree.dataset, `img${i}.txt`), word(letters!));
  }
  await (await host.get("/healthz")).arrayBuffer();
  const idleUntil = performance.now() + IDLE_MS;
  const idle = await probe(host, () => performance.now() > idleUntil);
  const started = performance.now();
  const id = await host.startJob();
  let prepared = false;
  const watch = until(host, id, (job) => job.phase !== "preparing" || isTerminal(job)).then(() => (prepared = true));
  const during = await probe(host, () => prepared);
  await watch;
  return { idle, during, preparedMs: performance.now() - started };
}

async function cancelRound(binary: string | undefined) {
  await using host = await startBenchWorker({ binary, tables });
  const photo = pngWithOrientation(solidPng(PHOTO_SIDE, PHOTO_SIDE, [90, 60, 30]), 6);
  writeFileSync(join(host.tree.dataset, "img0.png"), photo);
  const id = await host.startJob();
  // The copy done, the turn starts: a third of a second of the worker's CPU after that, it is under way.
  await until(host, id, () => {
    try {
      return readFileSync(join(host.tree.state, "jobs", id, "dataset", "images", "img0.png")).length === photo.length;
    } catch {
      return false;
    }
  });
  const ticks = () => {
    const fields = readFileSync(`/proc/${host.pid}/stat`, "latin1").split(") ")[1]!.split(" ");
    return Number(fields[11]) + Number(fields[12]);
  };
  const from = ticks();
  while (ticks() - from < 33) await Bun.sleep(10);
  const started = performance.now();
  const res = await host.post(`/train/${id}/cancel`, {});
  const body = (await res.json()) as Record<string, any>;
  if (body.status !== "cancelled") throw new Error(`the cancel ended the job ${body.status}`);
  return performance.now() - started;
}

export async function measure(): Promise<Row[]> {
  const out: Row[] = [];
  for (const { label, binary } of builds()) {
    const { idle, during, preparedMs } = await captionsRound(binary);
    const [i, d] = [summarize(idle), summarize(during)];
    console.log(`${label}idle p99 ${ms(i.p99)} max ${ms(i.max)} · preparing p99 ${ms(d.p99)} max ${ms(d.max)} (${during.length} probes); prepared in ${ms(preparedMs)}`);
    const bench = "41.1 hostile dataset";
    out.push({ bench, metric: `${label}/healthz max while captions of one ${WORD_LETTERS}- and ${SHORTER_LETTERS}-letter word are counted`, figure: ms(d.max), baseline: `${ms(i.max)} idle`, ratio: "", target: `< ${TARGET_MS} ms`, verdict: verdict(d.max, "<", TARGET_MS) });
    out.push({ bench, metric: `${label}preparation of those captions`, figure: ms(preparedMs), baseline: "", ratio: "", target: "", verdict: "info" });
    const cancelMs = await cancelRound(binary);
    console.log(`${label}cancel during a ${PHOTO_SIDE} x ${PHOTO_SIDE} turn answered in ${ms(cancelMs)}`);
    out.push({ bench, metric: `${label}cancel while a ${PHOTO_SIDE}x${PHOTO_SIDE} photo is turned`, figure: ms(cancelMs), baseline: "", ratio: "", target: `< ${TARGET_MS} ms`, verdict: verdict(cancelMs, "<", TARGET_MS) });
  }
  return out;
}

if (import.meta.main) await runBench("41.1-2 a hostile dataset's preparation", measure);
