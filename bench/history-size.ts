// Issue 14 item 1: a hot path must not scan the job history. The compiled worker on a database of 100,000 ended
// jobs against the same worker on one of 10, same run: GET /healthz, /metrics, /train?status=failed&limit=20 and
// GET /train/{id} (medians of 200 sequential requests each), and start-up to the first 200 (median of 3 starts).
// Both start from a clean stop, as after a deploy, so neither pays the integrity check.
import { join } from "node:path";
import { Database } from "bun:sqlite";
import { openJobStore } from "../src/store/job-store.ts";
import { ensureBinary } from "../test/support/binary.ts";
import { makeHostTree, SIMULATE_TABLES } from "../test/support/host-tree.ts";
import { startWorker } from "../test/support/worker-process.ts";
import { trackScratch } from "./lib/cleanup.ts";
import { runBench, verdict, type Row } from "./lib/report.ts";
import { median, ms, ratio } from "./lib/stats.ts";

const SMALL = 10;
const LARGE = 100_000;
const REQUESTS = 200;
const STARTS = 3;
const TARGET = 2;
const PATHS = ["/healthz", "/metrics", "/train?status=failed&limit=20"];

// The schema from the store itself, then the history in one transaction (a row per job as the store writes it, and
// as retention leaves a job older than keep_days: its directory pruned, its record kept).
function fill(state: string, jobs: number): string {
  openJobStore(join(state, "jobs.db")).close();
  using db = new Database(join(state, "jobs.db"));
  const insert = db.prepare(
    `INSERT INTO jobs (id, status, phase, created_at, ended_at, pruned_at, request, request_hash, simulated, log_path,
       error_code, error)
     VALUES (?, 'failed', 'training', ?, ?, ?3, '{"tier":"fast"}', ?, 1, ?, 'trainer_crashed', 'bench')`,
  );
  let last = "";
  db.transaction(() => {
    for (let i = 0; i < jobs; i++) {
      last = `00000000-0000-4000-8000-${String(i).padStart(12, "0")}`;
      const at = new Date(Date.UTC(2026, 0, 1) + i * 1000).toISOString();
      insert.run(last, at, at, last, join(state, "jobs", last, "train.log"));
    }
  })();
  return last;
}

async function timeRequests(url: string, path: string): Promise<number> {
  const times: number[] = [];
  for (let i = 0; i < REQUESTS; i++) {
    const t0 = performance.now();
    const res = await fetch(url + path);
    await res.arrayBuffer();
    if (res.status !== 200) throw new Error(`${path} answered ${res.status}`);
    times.push(performance.now() - t0);
  }
  return median(times);
}

async function measureHistory(jobs: number, binary: string) {
  using tree = makeHostTree();
  const untrack = trackScratch(tree.root);
  try {
    const last = fill(tree.state, jobs);
    const config = tree.writeConfig(`${SIMULATE_TABLES(0.01)}[auth]\nmode = "none"\n`);
    const starts: number[] = [];
    const figures: Record<string, number> = {};
    for (let s = 0; s < STARTS; s++) {
      const t0 = performance.now();
      await using worker = await startWorker(config, { command: [binary] });
      while ((await fetch(`${worker.url}/healthz`)).status !== 200) await Bun.sleep(1);
      starts.push(performance.now() - t0);
      if (s === 0) for (const path of [...PATHS, `/train/${last}`]) figures[path.startsWith("/train/0") ? "/train/{id}" : path] = await timeRequests(worker.url, path);
      worker.proc.kill("SIGTERM");
      await worker.proc.exited;
    }
    return { figures, start: median(starts) };
  } finally {
    untrack();
  }
}

export async function measure(): Promise<Row[]> {
  const binary = ensureBinary();
  const small = await measureHistory(SMALL, binary);
  const large = await measureHistory(LARGE, binary);
  console.log(`medians: ${SMALL} jobs ${JSON.stringify(small)}; ${LARGE} jobs ${JSON.stringify(large)}`);
  const bench = "14.1 history size";
  const row = (metric: string, figure: number, baseline: number): Row => ({
    bench, metric: `${metric}, ${LARGE} jobs`, figure: ms(figure), baseline: `${ms(baseline)} with ${SMALL}`, ratio: ratio(figure / baseline), target: `≤ ${TARGET}×`, verdict: verdict(figure / baseline, "<=", TARGET),
  });
  return [
    ...Object.keys(small.figures).map((path) => row(`GET ${path}`, large.figures[path]!, small.figures[path]!)),
    row("start-up to first 200", large.start, small.start),
  ];
}

if (import.meta.main) await runBench("14.1 history size", measure);
