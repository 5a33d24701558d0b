// Issue 48: the worst 64 KiB bodies a caller can send POST /train, against the compiled worker. Each body is sent
// ROUNDS times back to back while /healthz is probed on a fixed schedule; each answer is timed and sized.
// Baseline: the same probes with no POST, and the POST of a body with one fault. `BENCH_BEFORE=<binary>` adds an
// older build (51142d2 took 4.1 s and answered 677 kB for the 6,000 unknown keys).
import { type BenchWorker, startBenchWorker } from "./lib/bench-host.ts";
import { probeHealthz } from "./lib/probe.ts";
import { builds, runBench, verdict, type Row } from "./lib/report.ts";
import { ms, summarize } from "./lib/stats.ts";

const MAX_BODY = 64 * 1024;
const ROUNDS = 5;
const IDLE_MS = 1000;
const TARGET_MS = 50;

const tables = () => ({ trainer: { mode: "simulate" } });

// As many `key(i)` as fit in 64 KiB beside a valid request.
function filled(host: BenchWorker, entry: (i: number) => string): string {
  const base = JSON.stringify(host.tree.validRequest()).slice(0, -1);
  const parts: string[] = [];
  let size = base.length + 1;
  for (let i = 0; ; i++) {
    const next = `,${entry(i)}`;
    if (size + next.length > MAX_BODY) break;
    parts.push(next);
    size += next.length;
  }
  return `${base}${parts.join("")}}`;
}

function bodies(host: BenchWorker): Array<[string, string]> {
  return [
    ["one fault (baseline)", JSON.stringify(host.tree.validRequest({ tier: "fastest" }))],
    ["unknown keys", filled(host, (i) => `"k${i}":1`)],
    ["one repeated key", filled(host, () => `"seed":1`)],
    ["fractions of unknown keys", filled(host, (i) => `"n${i}":1.0`)],
    ["one 64 KiB unknown key", `{"${"x".repeat(MAX_BODY - 10)}":1}`],
  ];
}

async function post(host: BenchWorker, body: string) {
  const started = performance.now();
  const res = await fetch(`${host.url}/train`, {
    method: "POST",
    headers: { ...host.headers, "content-type": "application/json" },
    body,
  });
  const bytes = (await res.arrayBuffer()).byteLength;
  return { status: res.status, ms: performance.now() - started, bytes };
}

async function round(host: BenchWorker, body: string) {
  let sending = true;
  const answers: Array<Awaited<ReturnType<typeof post>>> = [];
  const probes = probeHealthz(host, () => !sending);
  for (let i = 0; i < ROUNDS; i++) answers.push(await post(host, body));
  sending = false;
  return { answers, probes: await probes };
}

export async function measure(): Promise<Row[]> {
  const out: Row[] = [];
  const bench = "48 a request's faults";
  for (const { label, binary } of builds()) {
    await using host = await startBenchWorker({ binary, tables });
    const idleUntil = performance.now() + IDLE_MS;
    const idle = summarize(await probeHealthz(host, () => performance.now() > idleUntil));
    for (const [name, body] of bodies(host)) {
      const { answers, probes } = await round(host, body);
      const worst = Math.max(...answers.map((a) => a.ms));
      const health = summarize(probes);
      const statuses = [...new Set(answers.map((a) => a.status))].join(",");
      console.log(`${label}${name}: ${body.length} B body → ${statuses}, ${answers[0]!.bytes} B answer, worst ${ms(worst)}; /healthz max ${ms(health.max)} (idle max ${ms(idle.max)})`);
      out.push({ bench, metric: `${label}${name}: worst POST /train answer (${body.length} B body, ${answers[0]!.bytes} B answer)`, figure: ms(worst), baseline: "", ratio: "", target: `< ${TARGET_MS} ms`, verdict: verdict(worst, "<", TARGET_MS) });
      out.push({ bench, metric: `${label}${name}: /healthz max meanwhile`, figure: ms(health.max), baseline: `${ms(idle.max)} idle`, ratio: "", target: `< ${TARGET_MS} ms`, verdict: verdict(health.max, "<", TARGET_MS) });
    }
  }
  return out;
}

if (import.meta.main) await runBench("48 the worst 64 KiB bodies", measure);
