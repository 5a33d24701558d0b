// Issue 8 item 3: time from the trainer writing a `steps:` redraw to GET /train/{id} showing that step. The trainer
// stamps each update just before writing it; this process polls the worker back to back. Baseline: this process
// reading the same log file directly every millisecond, the floor set by scheduling on this host. Two cadences:
// a fast one for many samples, and one like SDXL training (about a step a second), since a redraw that only the
// next one terminates waits for it. As information, the same through one event stream (no poller): its job is read
// every 100 ms and its events are spaced at least 250 ms apart.
import { closeSync, existsSync, openSync, readFileSync, readSync } from "node:fs";
import { join } from "node:path";
import { makeHostTree } from "../test/support/host-tree.ts";
import { bunTrainer, isTerminal, startBenchWorker, type BenchWorker } from "./lib/bench-host.ts";
import { runBench, verdict, type Row } from "./lib/report.ts";
import { ms, ratio, summarize } from "./lib/stats.ts";
import { epochMs } from "./lib/tqdm-trainer.ts";

const TARGET_P99_MS = 250;
const CADENCES = [
  { label: "20–60 ms apart", steps: 150, minMs: 20, maxMs: 60 },
  { label: "0.5–1.5 s apart", steps: 12, minMs: 500, maxMs: 1500 },
];
const STEP = /(\d+)\/\d+ \[/g;

// First moment each step was seen, by whatever source calls `saw`.
function sightings() {
  const seen = new Map<number, number>();
  let highest = 0;
  return {
    seen,
    saw(step: number, at: number) {
      for (; highest < step; highest++) seen.set(highest + 1, at);
    },
  };
}

async function pollWorker(host: BenchWorker, id: string, steps: number, saw: (step: number, at: number) => void): Promise<void> {
  for (;;) {
    const job = await host.job(id);
    saw(job.step, epochMs());
    if (isTerminal(job) || job.step >= steps) return;
  }
}

// The steps one event stream of the job shows, until the job is over or reaches `steps`.
async function streamWorker(host: BenchWorker, id: string, steps: number, saw: (step: number, at: number) => void): Promise<void> {
  const body = await host.events(id);
  const decoder = new TextDecoder();
  let carry = "";
  for await (const chunk of body) {
    const at = epochMs();
    const lines = (carry + decoder.decode(chunk, { stream: true })).split("\n");
    carry = lines.pop() ?? "";
    for (const line of lines) {
      if (!line.startsWith("data: ")) continue;
      const job = JSON.parse(line.slice("data: ".length)) as Record<string, any>;
      saw(job.step, at);
      if (isTerminal(job) || job.step >= steps) return;
    }
  }
}

async function pollFile(path: string, saw: (step: number, at: number) => void, until: () => boolean): Promise<void> {
  while (!existsSync(path)) await Bun.sleep(1);
  const fd = openSync(path, "r");
  const buf = Buffer.alloc(1 << 16);
  let offset = 0;
  let carry = "";
  try {
    while (!until()) {
      for (let n = readSync(fd, buf, 0, buf.length, offset); n > 0; n = readSync(fd, buf, 0, buf.length, offset)) {
        offset += n;
        const text = carry + buf.toString("utf8", 0, n);
        const at = epochMs();
        for (const m of text.matchAll(STEP)) saw(Number(m[1]), at);
        carry = text.slice(-64);
      }
      await Bun.sleep(1);
    }
  } finally {
    closeSync(fd);
  }
}

function delays(stampsFile: string, seen: Map<number, number>): number[] {
  return readFileSync(stampsFile, "utf8").trim().split("\n").map((line) => {
    const [step, at] = line.split(" ").map(Number) as [number, number];
    const when = seen.get(step);
    if (when === undefined) throw new Error(`step ${step} was never seen`);
    return when - at;
  });
}

type Watch = typeof pollWorker;

async function freshness({ steps, minMs, maxMs }: (typeof CADENCES)[number], watch: Watch) {
  const tree = makeHostTree();
  const stamps = join(tree.root, "stamps");
  const args = ["--stamps", stamps, "--count", String(steps), "--min-ms", String(minMs), "--max-ms", String(maxMs)];
  await using host = await startBenchWorker({ tree, tables: () => ({ trainer: bunTrainer(tree, "tqdm-trainer.ts", args) }) });
  const id = await host.startJob();
  const viaWorker = sightings();
  const direct = sightings();
  let done = false;
  const file = pollFile(join(host.tree.state, "jobs", id, "train.log"), direct.saw, () => done);
  await watch(host, id, steps, viaWorker.saw);
  done = true;
  await file;
  return { worker: summarize(delays(stamps, viaWorker.seen)), floor: summarize(delays(stamps, direct.seen)) };
}

export async function measure(): Promise<Row[]> {
  const bench = "3 progress freshness";
  const rows: Row[] = [];
  for (const cadence of CADENCES) {
    const { worker, floor } = await freshness(cadence, pollWorker);
    console.log(`${cadence.steps} steps ${cadence.label}; via GET /train/{id}: p50 ${ms(worker.p50)} p99 ${ms(worker.p99)} max ${ms(worker.max)}; reading the log directly: p50 ${ms(floor.p50)} p99 ${ms(floor.p99)} max ${ms(floor.max)}`);
    rows.push(
      { bench, metric: `write → GET /train/{id} p50, steps ${cadence.label}`, figure: ms(worker.p50), baseline: `${ms(floor.p50)} direct read`, ratio: "", target: "", verdict: "info" },
      { bench, metric: `write → GET /train/{id} p99, steps ${cadence.label}`, figure: ms(worker.p99), baseline: `${ms(floor.p99)} direct read`, ratio: ratio(worker.p99 / floor.p99), target: `≤ ${TARGET_P99_MS} ms`, verdict: verdict(worker.p99, "<=", TARGET_P99_MS) },
    );
  }
  for (const cadence of CADENCES) {
    const { worker, floor } = await freshness(cadence, streamWorker);
    console.log(`${cadence.steps} steps ${cadence.label}; via one event stream: p50 ${ms(worker.p50)} p99 ${ms(worker.p99)} max ${ms(worker.max)}; reading the log directly: p50 ${ms(floor.p50)} p99 ${ms(floor.p99)} max ${ms(floor.max)}`);
    rows.push({ bench, metric: `write → event stream p99, steps ${cadence.label}`, figure: ms(worker.p99), baseline: `${ms(floor.p99)} direct read`, ratio: ratio(worker.p99 / floor.p99), target: "", verdict: "info" });
  }
  return rows;
}

if (import.meta.main) await runBench("3. progress freshness", measure);
