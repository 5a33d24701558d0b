// Issue 8 item 5: 500 concurrent GET /gpu-status (one burst from a separate process) against an nvidia-smi that
// takes 300 ms, counting how many times nvidia-smi ran. One probe is two nvidia-smi processes (the device and
// the process query, run together). Baseline: a single GET /gpu-status on an expired cache, one uncontended probe.
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { FAKE_NVIDIA_SMI, makeHostTree } from "../test/support/host-tree.ts";
import { startBenchWorker, writeExecutable, type BenchWorker } from "./lib/bench-host.ts";
import { runLoad } from "./lib/load-client.ts";
import { runBench, verdict, type Row } from "./lib/report.ts";
import { median, ms, ratio } from "./lib/stats.ts";

const CONCURRENT = 500;
const BURSTS = 3;
const SINGLES = 3;
const DELAY_S = 0.3;
const TTL_MS = 2000;
const EXPIRY_MARGIN_MS = 300;
const NVIDIA_SMI_PER_PROBE = 2;
// The reference host of SPEC §1, as the fake prints it by default (a scenario dir replaces the default).
const DEVICES = [
  "0, 00000000:01:00.0, GPU-5e1c0a3b-7d24-4f89-b6a1-3c9e2f0d8b71, NVIDIA GeForce RTX 3090, 24576, 2, 24254, 0",
  "1, 00000000:02:00.0, GPU-a4f7d2e9-1b38-4c56-9e0f-7d2a8b3c6e15, NVIDIA RTX A6000, 49140, 4, 48669, 0",
];

function slowNvidiaSmi(root: string) {
  const scenario = join(root, "slow-gpu");
  mkdirSync(scenario, { recursive: true });
  writeFileSync(join(scenario, "query-gpu.csv"), `${DEVICES.join("\n")}\n`);
  writeFileSync(join(scenario, "delay-seconds"), `${DELAY_S}\n`);
  const countFile = join(root, "nvidia-smi-invocations");
  const path = writeExecutable(
    join(root, "nvidia-smi"),
    `#!/bin/sh\nexport FAKE_NVIDIA_SMI_SCENARIO='${scenario}'\nexport FAKE_NVIDIA_SMI_COUNT_FILE='${countFile}'\nexec '${FAKE_NVIDIA_SMI}' "$@"\n`,
  );
  return {
    path,
    reset: () => rmSync(countFile, { force: true }),
    runs: () => (existsSync(countFile) ? readFileSync(countFile, "utf8").split("\n").filter(Boolean).length : 0),
  };
}

async function single(host: BenchWorker): Promise<number> {
  const t0 = performance.now();
  const res = await host.get("/gpu-status");
  await res.arrayBuffer();
  if (res.status !== 200) throw new Error(`GET /gpu-status answered ${res.status}`);
  return performance.now() - t0;
}

export async function measure(): Promise<Row[]> {
  const tree = makeHostTree();
  const smi = slowNvidiaSmi(tree.root);
  await using host = await startBenchWorker({ tree, tables: () => ({ trainer: { mode: "simulate" }, gpu: { nvidia_smi: smi.path, cache_ttl_ms: TTL_MS } }) });
  const expire = () => Bun.sleep(TTL_MS + EXPIRY_MARGIN_MS);
  const singles: number[] = [];
  for (let i = 0; i < SINGLES; i++) {
    await expire();
    singles.push(await single(host));
  }
  const bursts: Array<{ probes: number; windows: number; p99: number; p50: number; elapsed: number }> = [];
  for (let i = 0; i < BURSTS; i++) {
    await expire();
    smi.reset();
    const r = await runLoad({ mode: "burst", url: host.url, path: "/gpu-status", headers: host.headers, connections: CONCURRENT });
    if (r.statuses["200"] !== CONCURRENT) throw new Error(`burst answers: ${JSON.stringify(r.statuses)}`);
    const probes = smi.runs() / NVIDIA_SMI_PER_PROBE;
    bursts.push({ probes, windows: Math.max(1, Math.ceil(r.elapsedMs / TTL_MS)), p50: r.latency.p50, p99: r.latency.p99, elapsed: r.elapsedMs });
    console.log(`burst ${i + 1}: ${CONCURRENT} answers in ${ms(r.elapsedMs)}, ${smi.runs()} nvidia-smi runs = ${probes} probe(s); p50 ${ms(r.latency.p50)} p99 ${ms(r.latency.p99)}`);
  }
  const perWindow = Math.max(...bursts.map((b) => b.probes / b.windows));
  const p99 = median(bursts.map((b) => b.p99));
  const base = median(singles);
  console.log(`single request on an expired cache: ${singles.map(ms).join(", ")}`);
  const bench = "5 GPU probe coalescing";
  return [
    { bench, metric: `probes per ${TTL_MS} ms TTL, ${CONCURRENT} concurrent`, figure: `${perWindow} (worst of ${BURSTS} bursts)`, baseline: "", ratio: "", target: "1 per TTL window", verdict: verdict(perWindow, "<=", 1) },
    { bench, metric: `latency p99, ${CONCURRENT} concurrent`, figure: ms(p99), baseline: `${ms(base)} one request alone`, ratio: ratio(p99 / base), target: "", verdict: "info" },
  ];
}

if (import.meta.main) await runBench("5. GPU probe coalescing", measure);
