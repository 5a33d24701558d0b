// Issue 47: a real run's wall time with its previews scored, against the same run without (target: within 2 %).
// Real sd-scripts on this CPU under the compiled worker, on the environment `bun run real-trainer` built and left in
// $REAL_TRAINER_DIR (its venv, its SDXL checkpoint of random weights, its CPU adapter): opt-in, minutes a run, so
// not in `bun run bench`. Each run is the worker's own smoke run (POST /smoke: 6 steps, previews at each point,
// paused at step 2 and resumed); scored, the face model runs in the venv's Python as the worker runs it (niced,
// beside the trainer); the baseline names a [likeness] python that is not there, so each point is not_scored at
// once. Runs alternate baseline-scored-scored-baseline, so that a host growing busier or quieter weighs on both alike.
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { freePort, layOutHost, startWorker, untilEnded } from "../scripts/real-trainer/host.ts";
import { checkpointPath, installedSdScripts, venvDir } from "../scripts/real-trainer/setup.ts";
import { mustRun } from "../scripts/real-trainer/steps.ts";
import { ensureBinary } from "../test/support/binary.ts";
import { runBench, verdict, type Row } from "./lib/report.ts";
import { ratio } from "./lib/stats.ts";

const work = process.env.REAL_TRAINER_DIR ?? "/var/tmp/lora-worker-real";
const adapter = join(venvDir(work), "bin", "cpu-accelerate");
const ORDER = ["baseline", "scored", "scored", "baseline"] as const;
type Kind = (typeof ORDER)[number];

interface Run {
  kind: Kind;
  id: string;
  seconds: number;
  likeness: string;
}

async function oneRun(kind: Kind, binary: string): Promise<Run> {
  const host = layOutHost(work, installedSdScripts(work), adapter, checkpointPath(work), freePort(), `bench-likeness-${kind}`);
  const missing = join(host.dir, "no-face-scorer", "python");
  if (kind === "baseline") writeFileSync(host.config, `${readFileSync(host.config, "utf8")}[likeness]\npython = ${JSON.stringify(missing)}\n`);
  // The operator's offline path to the two tokenizers: from what the binary carries.
  await mustRun([binary, "tokenizers", "write", "--config", host.config], join(host.dir, "tokenizers.log"));
  await using worker = await startWorker(binary, host.config, join(host.dir, "worker.log"));
  const posted = await worker.json("/smoke", { method: "POST", headers: { "content-type": "application/json" }, body: "{}" });
  if (posted.status !== 200) throw new Error(`POST /smoke answered ${posted.status}: ${JSON.stringify(posted.body)}`);
  // POST /smoke pauses its job at the first saved state (step 2), as `lora-worker smoke` drives it; resumed, it
  // trains to step 6. The run's time is the two jobs' spawn-to-end, without the polls' gap between them.
  const first = await untilEnded(worker, posted.body.worker_job_id as string);
  if (!first.paused) throw new Error(`job ${first.worker_job_id} ended ${first.status} where it should pause: ${first.error}`);
  const resumed = await worker.json(`/train/${first.worker_job_id}/resume`, { method: "POST" });
  if (resumed.status !== 200) throw new Error(`resume answered ${resumed.status}: ${JSON.stringify(resumed.body)}`);
  const last = await untilEnded(worker, resumed.body.worker_job_id as string);
  if (last.status !== "succeeded") throw new Error(`job ${last.worker_job_id} ended ${last.status}: ${last.error}`);
  const seconds = [first, last].reduce((sum, job) => sum + (Date.parse(job.ended_at) - Date.parse(job.started_at)) / 1000, 0);
  const { verdict: said, reason, points } = last.likeness;
  const likeness = `${said}${reason ? `: ${reason}` : ""}, ${points.length} points`;
  const id = last.worker_job_id as string;
  console.log(`${kind}: jobs ${first.worker_job_id} and ${id} trained in ${seconds.toFixed(1)} s (spawn to end); likeness ${likeness}`);
  return { kind, id, seconds, likeness };
}

async function measure(): Promise<Row[]> {
  const binary = ensureBinary();
  const runs: Run[] = [];
  for (const kind of ORDER) runs.push(await oneRun(kind, binary));
  const mean = (kind: Kind) => {
    const of = runs.filter((r) => r.kind === kind).map((r) => r.seconds);
    return of.reduce((a, b) => a + b, 0) / of.length;
  };
  const each = (kind: Kind) => runs.filter((r) => r.kind === kind).map((r) => `${r.seconds.toFixed(1)} s`).join(", ");
  const [scored, baseline] = [mean("scored"), mean("baseline")];
  const scoredRun = runs.find((r) => r.kind === "scored")!;
  const baselineRun = runs.find((r) => r.kind === "baseline")!;
  return [{
    bench: "47 likeness wall time",
    metric: `a real smoke run, previews scored (${each("scored")}; ${scoredRun.likeness})`,
    figure: `${scored.toFixed(1)} s`,
    baseline: `${baseline.toFixed(1)} s, the same run unscored (${each("baseline")}; ${baselineRun.likeness})`,
    ratio: ratio(scored / baseline),
    target: "<= 1.02",
    verdict: verdict(scored / baseline, "<=", 1.02),
  }];
}

if (!existsSync(join(venvDir(work), "bin", "python")) || !existsSync(checkpointPath(work)) || !existsSync(adapter)) {
  console.log(`likeness-wall: skipped: ${work} holds no real-trainer environment (run bun run real-trainer first)`);
  process.exit(0);
}
await runBench("47 a real run's wall time, previews scored against not", measure);
