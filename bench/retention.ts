// Issue 14 item 6: the state dir does not grow forever. The compiled worker starts on a state dir holding OLD ended
// jobs past retention.keep_days (each with its log and dataset copy) and KEEP recent ones. It prunes the old jobs'
// directories right after start-up and keeps every record. Figures: the time until the last old directory is gone,
// the bytes it freed, the records kept, /metrics' state dir size against `du`, and /healthz answered back to back
// while it prunes. Baseline: `rm -rf` of an identical set of directories, same run.
import { Database } from "bun:sqlite";
import { mkdirSync, readdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { openJobStore } from "../src/store/job-store.ts";
import { ensureBinary } from "../test/support/binary.ts";
import { makeHostTree, SIMULATE_TABLES } from "../test/support/host-tree.ts";
import { startWorker } from "../test/support/worker-process.ts";
import { trackScratch } from "./lib/cleanup.ts";
import { runBench, verdict, type Row } from "./lib/report.ts";
import { mib, ms, percentile, ratio } from "./lib/stats.ts";

const OLD = 1000;
const KEEP = 20;
const LOG_BYTES = 96 * 1024;
const DATASET_FILES = 3;
const DATASET_FILE_BYTES = 64 * 1024;
const TARGET_P99_MS = 250;
const DAY_MS = 24 * 60 * 60 * 1000;

const idOf = (i: number) => `00000000-0000-4000-8000-${String(i).padStart(12, "0")}`;

// A job directory as a run leaves it: its log and its dataset copy.
function jobDir(root: string, id: string): void {
  const dir = join(root, id);
  mkdirSync(join(dir, "dataset"), { recursive: true });
  writeFileSync(join(dir, "train.log"), Buffer.alloc(LOG_BYTES, "x"));
  for (let f = 0; f < DATASET_FILES; f++) writeFileSync(join(dir, "dataset", `img${f}.png`), Buffer.alloc(DATASET_FILE_BYTES, f));
}

// OLD jobs that ended 60 days ago, KEEP that ended an hour ago; a directory for each, in the state dir and in `copy`.
function fill(state: string, copy: string): void {
  openJobStore(join(state, "jobs.db")).close();
  using db = new Database(join(state, "jobs.db"));
  const insert = db.prepare(
    `INSERT INTO jobs (id, status, phase, created_at, ended_at, request, request_hash, simulated, log_path, error_code, error)
     VALUES (?, 'failed', 'training', ?, ?, '{"tier":"fast"}', ?, 1, ?, 'trainer_crashed', 'bench')`,
  );
  const now = Date.now();
  db.transaction(() => {
    for (let i = 0; i < OLD + KEEP; i++) {
      const at = new Date(now - (i < OLD ? 60 * DAY_MS : 3_600_000) + i).toISOString();
      insert.run(idOf(i), at, at, idOf(i), join(state, "jobs", idOf(i), "train.log"));
      jobDir(join(state, "jobs"), idOf(i));
      if (i < OLD) jobDir(copy, idOf(i));
    }
  })();
}

function du(path: string): number {
  return Number(Bun.spawnSync(["du", "-sb", path]).stdout.toString().split("\t")[0]);
}

export async function measure(): Promise<Row[]> {
  const binary = ensureBinary();
  using tree = makeHostTree();
  const untrack = trackScratch(tree.root);
  try {
    const copy = join(tree.root, "copy");
    fill(tree.state, copy);
    const before = du(tree.state);
    const t0 = performance.now();
    Bun.spawnSync(["rm", "-rf", copy]);
    const rmMs = performance.now() - t0;

    const config = tree.writeConfig(`${SIMULATE_TABLES(0.01)}[auth]\nmode = "none"\n[retention]\nkeep_days = 30\nkeep_last = ${KEEP}\n`);
    const started = performance.now();
    await using worker = await startWorker(config, { command: [binary] });
    const latencies: number[] = [];
    // The round is over when /metrics first shows the state dir's size (measured last, after the removals).
    const stateDirBytes = async () =>
      /^lora_worker_state_dir_bytes (\d+)/m.exec(await (await fetch(`${worker.url}/metrics`)).text())?.[1];
    let reported: string | undefined;
    while ((reported = await stateDirBytes()) === undefined) {
      const t = performance.now();
      const res = await fetch(`${worker.url}/healthz`);
      await res.arrayBuffer();
      latencies.push(performance.now() - t);
    }
    const pruneMs = performance.now() - started;
    const left = readdirSync(join(tree.state, "jobs")).length;
    if (left !== KEEP) throw new Error(`${left} job directories left after the round, not ${KEEP}`);
    const after = du(tree.state);
    using db = new Database(join(tree.state, "jobs.db"), { readonly: true });
    const reportedBytes = Number(reported);
    const records = db.query<{ n: number; pruned: number }, []>(
      "SELECT count(*) AS n, count(pruned_at) AS pruned FROM jobs",
    ).get()!;
    const p99 = percentile(latencies, 99);
    console.log(
      `pruned ${OLD} of ${OLD + KEEP} job dirs in ${ms(pruneMs)} from start (rm -rf of the same: ${ms(rmMs)}); ` +
        `state dir ${mib(before)} → ${mib(after)} (du), /metrics says ${mib(reportedBytes)}; records ${records.n}, ` +
        `${records.pruned} marked pruned; /healthz ${latencies.length} answers meanwhile, p99 ${ms(p99)}`,
    );
    const bench = "14.6 retention";
    return [
      {
        bench, metric: `start to ${OLD} old job dirs pruned`, figure: ms(pruneMs), baseline: `${ms(rmMs)} rm -rf`,
        ratio: ratio(pruneMs / rmMs), target: "", verdict: "info",
      },
      {
        bench, metric: "state dir freed", figure: `${mib(before)} → ${mib(after)}`, baseline: `${mib(reportedBytes)} in /metrics`,
        ratio: ratio(reportedBytes / after), target: "/metrics = du ±5 %", verdict: verdict(Math.abs(reportedBytes / after - 1), "<=", 0.05),
      },
      {
        bench, metric: "records kept, marked pruned", figure: `${records.n}, ${records.pruned}`, baseline: `${OLD + KEEP}, ${OLD}`,
        ratio: "", target: "all kept", verdict: records.n === OLD + KEEP && records.pruned === OLD ? "PASS" : "MISS",
      },
      {
        bench, metric: "/healthz p99 while pruning", figure: ms(p99), baseline: `${latencies.length} answers`,
        ratio: "", target: `≤ ${TARGET_P99_MS} ms`, verdict: verdict(p99, "<=", TARGET_P99_MS),
      },
    ];
  } finally {
    untrack();
  }
}

if (import.meta.main) await runBench("14.6 retention", measure);
