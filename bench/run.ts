// `bun run bench`: every benchmark (issue 8's, then issue 12's), one after another, each in its own process, then one table.
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { availableParallelism, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { ensureBinary } from "../test/support/binary.ts";
import { formatTable, type Row } from "./lib/report.ts";

const SCRIPTS = [
  "status-under-load.ts",
  "supervisor-overhead.ts",
  "progress-freshness.ts",
  "log-tail.ts",
  "follower-starvation.ts",
  "gpu-coalescing.ts",
  "startup-footprint.ts",
  "dispatch.ts",
  "lora-finite-scan.ts",
  "dataset-snapshot.ts",
  "history-size.ts",
  "sse-fanout.ts",
  "retention.ts",
  "healthz-under-flood.ts",
  "hostile-dataset.ts",
  "fault-flood.ts",
  "likeness-point.ts",
  "dataset-check.ts",
  "config-error-line.ts",
];

const load = () => loadavg().map((l) => l.toFixed(2)).join(" ");

const binary = ensureBinary();
const version = Bun.spawnSync([binary, "--version"]).stdout.toString().trim();
const started = performance.now();
console.log(`lora-worker benchmarks · ${new Date().toISOString()} · ${version} · ${availableParallelism()} CPUs · load average ${load()}`);
const dir = mkdtempSync(join(tmpdir(), "lora-worker-bench-run-"));
const rows: Row[] = [];
try {
  for (const script of SCRIPTS) {
    const out = join(dir, `${script}.json`);
    const proc = Bun.spawn([process.execPath, join(import.meta.dir, script)], { env: { ...process.env, BENCH_RESULT_FILE: out }, stdout: "inherit", stderr: "inherit" });
    const code = await proc.exited;
    if (code === 0) rows.push(...(JSON.parse(readFileSync(out, "utf8")) as Row[]));
    else rows.push({ bench: script, metric: `exited ${code}`, figure: "", baseline: "", ratio: "", target: "", verdict: "ERROR" });
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}
console.log(`\n== all benchmarks (${((performance.now() - started) / 1000).toFixed(0)} s, load average now ${load()})\n${formatTable(rows)}`);
process.exit(rows.some((r) => r.verdict === "ERROR") ? 1 : 0);
