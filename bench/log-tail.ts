// Issue 8 item 4: GET /train/{id}/log?lines=200 on a finished job's 1 MiB log and on another's 1 GiB log, requests
// alternating between the two so host noise hits both alike. The 1 MiB log is the baseline.
import { closeSync, existsSync, openSync, statfsSync, writeSync } from "node:fs";
import { join } from "node:path";
import { makeHostTree, type HostTree } from "../test/support/host-tree.ts";
import { isTerminal, realTrainer, startBenchWorker, type BenchWorker } from "./lib/bench-host.ts";
import { runBench, verdict, type Row } from "./lib/report.ts";
import { mib, ms, ratio, summarize } from "./lib/stats.ts";

const MiB = 2 ** 20;
const SMALL_MIB = 1;
const LARGE_MIB = 1024;
const WARMUP = 20;
const SAMPLES = 100;
const TARGET_RATIO = 2;

const SHM = "/dev/shm";

// A RAM-backed scratch host when there is room: writing 1 GiB to a shared disk takes longer than the whole
// benchmark should, and a tail that scans would show on tmpfs just as it would on disk.
function scratchHost(): HostTree {
  const room = existsSync(SHM) ? statfsSync(SHM).bavail * statfsSync(SHM).bsize : 0;
  if (room < 2 * (LARGE_MIB + SMALL_MIB) * MiB) return makeHostTree();
  const saved = process.env.TMPDIR;
  process.env.TMPDIR = SHM;
  try {
    return makeHostTree();
  } finally {
    if (saved === undefined) delete process.env.TMPDIR;
    else process.env.TMPDIR = saved;
  }
}

// 1 MiB of whole log lines the length sd-scripts' INFO lines have, padded to the byte.
function logChunk(): Buffer {
  const line = "2025-01-01 12:00:00 INFO     epoch is incremented. current_epoch: 0, epoch: 1            train_network.py:1080\n";
  const text = line.repeat(Math.floor(MiB / line.length));
  return Buffer.from(text + "#".repeat(MiB - text.length - 1) + "\n");
}

function growLog(path: string, mebibytes: number): void {
  const chunk = logChunk();
  const fd = openSync(path, "w");
  try {
    for (let i = 0; i < mebibytes; i++) writeSync(fd, chunk);
  } finally {
    closeSync(fd);
  }
}

async function finishedJob(host: BenchWorker, name: string): Promise<string> {
  const id = await host.startJob({ output_name: name });
  await host.waitForJob(id, isTerminal);
  return id;
}

async function timeTail(host: BenchWorker, id: string): Promise<number> {
  const t0 = performance.now();
  const res = await host.get(`/train/${id}/log?lines=200`);
  const text = await res.text();
  const elapsed = performance.now() - t0;
  if (res.status !== 200 || text.split("\n").length !== 201) throw new Error(`log tail answered ${res.status} with ${text.split("\n").length - 1} lines`);
  return elapsed;
}

export async function measure(): Promise<Row[]> {
  await using host = await startBenchWorker({ tree: scratchHost(), tables: (tree) => ({ trainer: realTrainer(tree, "accelerate", ["/bin/true"]) }) });
  const small = await finishedJob(host, "small");
  const large = await finishedJob(host, "large");
  const t0 = performance.now();
  growLog(join(host.tree.state, "jobs", small, "train.log"), SMALL_MIB);
  growLog(join(host.tree.state, "jobs", large, "train.log"), LARGE_MIB);
  console.log(`wrote ${mib(SMALL_MIB * MiB)} and ${mib(LARGE_MIB * MiB)} logs under ${host.tree.root} in ${ms(performance.now() - t0)}`);
  const times = { small: [] as number[], large: [] as number[] };
  for (let i = 0; i < WARMUP + SAMPLES; i++) {
    const [a, b] = [await timeTail(host, small), await timeTail(host, large)];
    if (i >= WARMUP) times.small.push(a), times.large.push(b);
  }
  const s = summarize(times.small);
  const l = summarize(times.large);
  console.log(`${SAMPLES} alternating requests each: 1 MiB p50 ${ms(s.p50)} p99 ${ms(s.p99)}; 1 GiB p50 ${ms(l.p50)} p99 ${ms(l.p99)}`);
  const bench = "4 log tail";
  return [
    { bench, metric: "?lines=200 on 1 GiB, p50", figure: ms(l.p50), baseline: `${ms(s.p50)} on 1 MiB`, ratio: ratio(l.p50 / s.p50), target: `ratio ≤ ${TARGET_RATIO}`, verdict: verdict(l.p50 / s.p50, "<=", TARGET_RATIO) },
    { bench, metric: "?lines=200 on 1 GiB, p99", figure: ms(l.p99), baseline: `${ms(s.p99)} on 1 MiB`, ratio: ratio(l.p99 / s.p99), target: "", verdict: "info" },
  ];
}

if (import.meta.main) await runBench("4. log tail cost", measure);
