// Issue 8 item 7: the POST /train round trip (all validation over a 500-image dataset, the GPU admission probe,
// the job record and the spawn) for a fresh job each time; the previous job is let end before the next POST.
// Baseline, interleaved: the same POST with an invalid tier, refused by the schema before any filesystem check.
// Run twice: with admission enforced (a fresh nvidia-smi probe per dispatch, the default) and with it off.
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { makeHostTree } from "../test/support/host-tree.ts";
import { isTerminal, realTrainer, startBenchWorker, type BenchWorker } from "./lib/bench-host.ts";
import { runBench, verdict, type Row } from "./lib/report.ts";
import { ms, ratio, summarize } from "./lib/stats.ts";

const IMAGES = 500;
const WARMUP = 1;
const SAMPLES = 20;
const TARGET_P99_MS = 50;

async function timedPost(host: BenchWorker, body: unknown, expect: number): Promise<{ ms: number; body: Record<string, any> }> {
  const t0 = performance.now();
  const res = await host.post("/train", body);
  const answer = (await res.json()) as Record<string, any>;
  const elapsed = performance.now() - t0;
  if (res.status !== expect) throw new Error(`POST /train answered ${res.status}, expected ${expect}: ${JSON.stringify(answer)}`);
  return { ms: elapsed, body: answer };
}

async function dispatchSeries(admission: "enforce" | "off") {
  const tree = makeHostTree(IMAGES);
  for (let i = 0; i < IMAGES; i++) writeFileSync(join(tree.dataset, `img${i}.txt`), "ohwx person");
  await using host = await startBenchWorker({ tree, tables: (t) => ({ trainer: realTrainer(t, "accelerate", ["/bin/true"]), gpu: { admission } }) });
  const dispatch: number[] = [];
  const refused: number[] = [];
  for (let i = 0; i < WARMUP + SAMPLES; i++) {
    const ok = await timedPost(host, tree.validRequest({ output_name: `lora${i}` }), 200);
    if (ok.body.status !== "starting") throw new Error(`a dispatched job answered ${JSON.stringify(ok.body)}`);
    const bad = await timedPost(host, tree.validRequest({ output_name: `lora${i}`, tier: "turbo" }), 422);
    if (i >= WARMUP) dispatch.push(ok.ms), refused.push(bad.ms);
    await host.waitForJob(ok.body.worker_job_id, isTerminal);
  }
  const d = summarize(dispatch);
  const r = summarize(refused);
  console.log(`admission ${admission}: ${SAMPLES} dispatches, ${IMAGES}-image dataset: p50 ${ms(d.p50)} p99 ${ms(d.p99)}; schema 422: p50 ${ms(r.p50)} p99 ${ms(r.p99)}`);
  return { d, r };
}

export async function measure(): Promise<Row[]> {
  const bench = "7 dispatch";
  const enforce = await dispatchSeries("enforce");
  const off = await dispatchSeries("off");
  const row = (label: string, { d, r }: typeof enforce, target: boolean): Row[] => [
    { bench, metric: `POST /train p50, ${label}`, figure: ms(d.p50), baseline: `${ms(r.p50)} schema 422`, ratio: ratio(d.p50 / r.p50), target: "", verdict: "info" },
    {
      bench, metric: `POST /train p99, ${label}`, figure: ms(d.p99), baseline: `${ms(r.p99)} schema 422`, ratio: ratio(d.p99 / r.p99),
      target: target ? `≤ ${TARGET_P99_MS} ms` : "", verdict: target ? verdict(d.p99, "<=", TARGET_P99_MS) : "info",
    },
  ];
  return [...row(`${IMAGES} images, admission probe (default)`, enforce, true), ...row(`${IMAGES} images, gpu.admission = off`, off, false)];
}

if (import.meta.main) await runBench("7. dispatch", measure);
