// Issue 8 item 6: exec of `dist/lora-worker serve` to the first 200 from /healthz, against a bare Bun.serve
// compiled the same way (`bun build --compile`) in this run; idle RSS of both; both binaries' size. Runs alternate.
// Also exec → exit of `--version` for both: the share of start-up that is loading the program itself.
import { mkdtempSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ensureBinary } from "../test/support/binary.ts";
import { makeHostTree, simulateConfig } from "../test/support/host-tree.ts";
import { FAKE_GPU, toml } from "./lib/bench-host.ts";
import { trackScratch } from "./lib/cleanup.ts";
import { BARE_SERVER, spawnListening } from "./lib/listening.ts";
import { rssBytes } from "./lib/proc.ts";
import { runBench, verdict, type Row } from "./lib/report.ts";
import { median, mib, ms, ratio } from "./lib/stats.ts";

const RUNS = 7;
const IDLE_SETTLE_MS = 2000;
const TARGET_START_MS = 100;
const TARGET_RSS_MIB = 60;

function compileBare(dir: string): string {
  const outfile = join(dir, "bare-server");
  const res = Bun.spawnSync([process.execPath, "build", "--compile", BARE_SERVER, "--outfile", outfile], { stdout: "pipe", stderr: "pipe" });
  if (res.exitCode !== 0) throw new Error(`bun build --compile failed: ${res.stderr.toString()}`);
  return outfile;
}

// Exec to the first 200 from `path`, then (on request) the idle RSS once the process has settled.
async function startOnce(command: string[], path: string, idleRss: boolean): Promise<{ ms: number; listened: number; rss: number }> {
  const t0 = performance.now();
  await using server = await spawnListening(command);
  let res = await fetch(server.url + path);
  while (res.status !== 200) res = await fetch(server.url + path);
  await res.arrayBuffer();
  const elapsed = performance.now() - t0;
  if (!idleRss) return { ms: elapsed, listened: server.listenedMs, rss: Number.NaN };
  await Bun.sleep(IDLE_SETTLE_MS);
  return { ms: elapsed, listened: server.listenedMs, rss: rssBytes(server.proc.pid) };
}

async function versionOnce(command: string[]): Promise<number> {
  const t0 = performance.now();
  const proc = Bun.spawn(command, { stdout: "ignore", stderr: "ignore" });
  if ((await proc.exited) !== 0) throw new Error(`${command.join(" ")} exited ${proc.exitCode}`);
  return performance.now() - t0;
}

export async function measure(): Promise<Row[]> {
  const binary = ensureBinary();
  const dir = mkdtempSync(join(tmpdir(), "lora-worker-bench-"));
  using tree = makeHostTree();
  const untrack = [trackScratch(dir), trackScratch(tree.root)];
  try {
    const bare = compileBare(dir);
    writeFileSync(join(tree.root, "token"), `${crypto.randomUUID().replaceAll("-", "")}\n`, { mode: 0o600 });
    writeFileSync(tree.configPath, simulateConfig(tree) + toml({ trainer: { mode: "simulate" }, gpu: FAKE_GPU, auth: { token_file: join(tree.root, "token") } }));
    const worker = { ms: [] as number[], listened: [] as number[], rss: Number.NaN, version: [] as number[] };
    const base = { ms: [] as number[], listened: [] as number[], rss: Number.NaN, version: [] as number[] };
    for (let i = 0; i < RUNS; i++) {
      const last = i === RUNS - 1;
      base.version.push(await versionOnce([bare, "--version"]));
      worker.version.push(await versionOnce([binary, "--version"]));
      const b = await startOnce([bare], "/", last);
      const w = await startOnce([binary, "serve", "--config", tree.configPath], "/healthz", last);
      base.ms.push(b.ms), worker.ms.push(w.ms), base.listened.push(b.listened), worker.listened.push(w.listened);
      if (last) base.rss = b.rss, worker.rss = w.rss;
    }
    console.log(`exec → first 200 over ${RUNS} runs each: worker ${worker.ms.map(ms).join(", ")}; bare ${base.ms.map(ms).join(", ")}`);
    console.log(`exec → "listening" line: worker ${worker.listened.map(ms).join(", ")}; bare ${base.listened.map(ms).join(", ")}`);
    console.log(`exec → exit of --version: worker ${worker.version.map(ms).join(", ")}; bare ${base.version.map(ms).join(", ")}`);
    const [w, b] = [median(worker.ms), median(base.ms)];
    const [wv, bv] = [median(worker.version), median(base.version)];
    const [wSize, bSize] = [statSync(binary).size, statSync(bare).size];
    const bench = "6 start-up and footprint";
    return [
      { bench, metric: "exec → first 200 /healthz (median)", figure: ms(w), baseline: `${ms(b)} bare compiled Bun.serve`, ratio: ratio(w / b), target: `≤ ${TARGET_START_MS} ms`, verdict: verdict(w, "<=", TARGET_START_MS) },
      { bench, metric: "exec → \"listening\" logged (median)", figure: ms(median(worker.listened)), baseline: `${ms(median(base.listened))} bare compiled`, ratio: ratio(median(worker.listened) / median(base.listened)), target: "", verdict: "info" },
      { bench, metric: "exec → exit of --version (median)", figure: ms(wv), baseline: `${ms(bv)} bare compiled`, ratio: ratio(wv / bv), target: "", verdict: "info" },
      { bench, metric: "idle RSS", figure: mib(worker.rss), baseline: `${mib(base.rss)} bare compiled`, ratio: ratio(worker.rss / base.rss), target: `≤ ${TARGET_RSS_MIB} MiB`, verdict: verdict(worker.rss / 2 ** 20, "<=", TARGET_RSS_MIB) },
      { bench, metric: "binary size", figure: mib(wSize), baseline: `${mib(bSize)} bare compiled`, ratio: ratio(wSize / bSize), target: "", verdict: "info" },
    ];
  } finally {
    rmSync(dir, { recursive: true, force: true });
    untrack.forEach((u) => u());
  }
}

if (import.meta.main) await runBench("6. start-up and footprint", measure);
