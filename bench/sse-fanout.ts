// Issue 14 item 4: the compiled worker's CPU and RSS with 1,000 clients on GET /train/{id}/events of one simulated
// job, against the same job with one client, same run. The clients are raw sockets in this process, so neither
// fetch's connection pool nor a client library stands between them and the worker. BENCH_BEFORE=<binary>
// adds the same figures for another build (e.g. the commit before the shared feed) as a before.
import { connect, type Socket } from "node:net";
import { startBenchWorker } from "./lib/bench-host.ts";
import { cpuMeter, rssBytes } from "./lib/proc.ts";
import { builds, runBench, verdict, type Row } from "./lib/report.ts";
import { mib, ratio } from "./lib/stats.ts";

const CLIENTS = 1000;
const CONNECT_BATCH = 100;
const SECONDS_PER_STEP = 0.05; // 20 changes/s, throttled to 4 events/s per stream
const WINDOW_MS = 4000;
const SETTLE_MS = 500;
const TARGET_CPU_SHARE = 0.05;

interface Client {
  socket: Socket;
  bytes: number;
}

function openClient(url: string, path: string, headers: Record<string, string>): Promise<Client> {
  const { hostname, port, host } = new URL(url);
  const head = [`GET ${path} HTTP/1.1`, `Host: ${host}`, "Accept: text/event-stream", ...Object.entries(headers).map(([k, v]) => `${k}: ${v}`), "", ""].join("\r\n");
  return new Promise((resolve, reject) => {
    const client: Client = { socket: connect(Number(port), hostname, () => client.socket.write(head)), bytes: 0 };
    client.socket.once("error", reject);
    client.socket.on("data", (chunk: Buffer) => {
      if (client.bytes === 0) resolve(client);
      client.bytes += chunk.length;
    });
  });
}

async function openClients(n: number, url: string, path: string, headers: Record<string, string>): Promise<Client[]> {
  const clients: Client[] = [];
  for (let i = 0; i < n; i += CONNECT_BATCH) {
    clients.push(...(await Promise.all(Array.from({ length: Math.min(CONNECT_BATCH, n - i) }, () => openClient(url, path, headers)))));
  }
  return clients;
}

interface Window {
  cpuShare: number;
  rss: number;
  bytesPerClientS: number;
}

async function measureWindow(pid: number, clients: Client[]): Promise<Window> {
  await Bun.sleep(SETTLE_MS);
  const bytes0 = clients.reduce((a, c) => a + c.bytes, 0);
  const meter = cpuMeter(pid);
  await Bun.sleep(WINDOW_MS);
  const cpu = meter();
  const bytes = clients.reduce((a, c) => a + c.bytes, 0) - bytes0;
  return { cpuShare: cpu.share, rss: rssBytes(pid), bytesPerClientS: bytes / clients.length / cpu.wallS };
}

async function measureBuild(binary?: string): Promise<{ one: Window; many: Window }> {
  await using host = await startBenchWorker({ binary, tables: () => ({ trainer: { mode: "simulate", cancel_grace_seconds: 2 }, simulate: { seconds_per_step: SECONDS_PER_STEP } }) });
  const id = await host.startJob();
  await host.waitForJob(id, (j) => j.status === "training" && j.step > 0);
  const path = `/train/${id}/events`;
  const first = await openClients(1, host.url, path, host.headers);
  const one = await measureWindow(host.pid, first);
  const rest = await openClients(CLIENTS - 1, host.url, path, host.headers);
  const many = await measureWindow(host.pid, [...first, ...rest]);
  const job = await host.job(id);
  [...first, ...rest].forEach((c) => c.socket.destroy());
  if (job.status !== "training") throw new Error(`the job left training during the measurement: ${JSON.stringify(job)}`);
  return { one, many };
}

function rows(label: string, { one, many }: { one: Window; many: Window }): Row[] {
  const bench = "14.4 SSE fan-out";
  const pct = (share: number) => `${(share * 100).toFixed(2)} %`;
  const rate = (w: Window) => `${(w.bytesPerClientS / 1024).toFixed(1)} KiB/s per client`;
  return [
    // What the clients cost: the worker with them, less the same worker (supervising the same job) with one.
    { bench, metric: `${label}CPU of ${CLIENTS - 1} more streams of one job`, figure: pct(many.cpuShare - one.cpuShare), baseline: `${pct(one.cpuShare)} with 1 stream, ${pct(many.cpuShare)} with ${CLIENTS}`, ratio: ratio(many.cpuShare / one.cpuShare), target: label ? "" : `< ${pct(TARGET_CPU_SHARE)} of a core`, verdict: label ? "info" : verdict(many.cpuShare - one.cpuShare, "<", TARGET_CPU_SHARE) },
    { bench, metric: `${label}worker CPU, ${CLIENTS} streams of one job`, figure: pct(many.cpuShare), baseline: `${pct(one.cpuShare)} with 1 stream`, ratio: ratio(many.cpuShare / one.cpuShare), target: "", verdict: "info" },
    { bench, metric: `${label}worker RSS, ${CLIENTS} streams`, figure: mib(many.rss), baseline: `${mib(one.rss)} with 1 stream`, ratio: ratio(many.rss / one.rss), target: "", verdict: "info" },
    { bench, metric: `${label}delivered, ${CLIENTS} streams`, figure: rate(many), baseline: rate(one), ratio: ratio(many.bytesPerClientS / one.bytesPerClientS), target: "", verdict: "info" },
  ];
}

export async function measure(): Promise<Row[]> {
  const out: Row[] = [];
  for (const { label, binary } of builds()) {
    const w = await measureBuild(binary);
    const pct = (share: number) => `${(share * 100).toFixed(2)} % CPU`;
    console.log(`${label || "this build: "}1 stream ${pct(w.one.cpuShare)}, ${mib(w.one.rss)} · ${CLIENTS} streams ${pct(w.many.cpuShare)}, ${mib(w.many.rss)}`);
    out.push(...rows(label, w));
  }
  return out;
}

if (import.meta.main) await runBench("14.4. SSE fan-out", measure);
