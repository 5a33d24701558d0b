// Issue 8 item 2: the worker's own CPU time (utime+stime of its pid in /proc/<pid>/stat, not the shim's nor the
// trainer's) over wall time while a job trains, at a steady 10 steps/s (the simulator) and under a flood
// (a trainer printing 5,000 tqdm redraws/s). At 10 steps/s twice: with nobody looking at the job (the target's
// case), and with one event stream following it (which the worker reads ten times a second), as information.
// Baselines, following the same log over the same window: a bare Bun process that only watches and reads it (the
// runtime's floor), and `tail -f` (the floor of any follower).
// BENCH_BEFORE=<binary> adds the same windows for another build (e.g. the commit before a change) as a before.
import { join } from "node:path";
import { startBenchWorker, bunTrainer, type BenchWorker } from "./lib/bench-host.ts";
import { trackPid } from "./lib/cleanup.ts";
import { cpuMeter, rssBytes } from "./lib/proc.ts";
import { builds, runBench, verdict, type Row } from "./lib/report.ts";
import { count, mib, ratio } from "./lib/stats.ts";

const REALISTIC_WINDOW_S = 20;
const REALISTIC_WARMUP_STEPS = 250;
const FLOOD_WINDOW_S = 10;
const FLOOD_RATE = 5000;
const RSS_FLAT_GROWTH = 0.1;
const BARE_FOLLOWER = join(import.meta.dir, "lib/bare-follower.ts");

interface Window {
  // Events an open stream received in the window, or null with none open.
  events: number | null;
  cpu: number;
  bunCpu: number;
  tailCpu: number;
  rssStart: number;
  rssEnd: number;
  rssMax: number;
  steps: number;
  wallS: number;
}

// An event stream of the job, read and counted until closed.
async function openStream(host: BenchWorker, id: string) {
  const reader = (await host.events(id)).getReader();
  let events = 0;
  const reading = (async () => {
    for (let r = await reader.read(); !r.done; r = await reader.read()) events += r.value.length > 0 ? 1 : 0;
  })().catch(() => undefined);
  return {
    events: () => events,
    async close() {
      await reader.cancel();
      await reading;
    },
  };
}

// Watches a running job for `seconds` with nothing else talking to the worker, or nothing but one event stream.
async function watchWindow(host: BenchWorker, id: string, seconds: number, streamed = false): Promise<Window> {
  const logPath = `${host.tree.state}/jobs/${id}/train.log`;
  const stream = streamed ? await openStream(host, id) : null;
  const tail = Bun.spawn(["tail", "-n", "0", "-f", logPath], { stdout: "ignore", stderr: "ignore" });
  const bun = Bun.spawn([process.execPath, BARE_FOLLOWER, logPath], { stdout: "ignore", stderr: "inherit" });
  const untrack = [trackPid(tail.pid), trackPid(bun.pid)];
  try {
    await Bun.sleep(500); // the bare follower's own start-up is not following
    const job = await host.job(id);
    const eventsBefore = stream?.events() ?? 0;
    const worker = cpuMeter(host.pid);
    const follower = cpuMeter(tail.pid);
    const bunFollower = cpuMeter(bun.pid);
    const rssStart = rssBytes(host.pid);
    let rssMax = rssStart;
    const end = performance.now() + seconds * 1000;
    while (performance.now() < end) {
      await Bun.sleep(Math.min(500, end - performance.now()));
      rssMax = Math.max(rssMax, rssBytes(host.pid));
    }
    const own = worker();
    const events = stream ? stream.events() - eventsBefore : null;
    const tailCpu = follower().share;
    const bunCpu = bunFollower().share;
    const rssEnd = rssBytes(host.pid);
    const after = await host.job(id);
    if (after.status !== "training") throw new Error(`the job left training during the window: ${JSON.stringify(after)}`);
    return { events, cpu: own.share, bunCpu, tailCpu, rssStart, rssEnd, rssMax, steps: after.step - job.step, wallS: own.wallS };
  } finally {
    await stream?.close();
    tail.kill("SIGKILL");
    bun.kill("SIGKILL");
    untrack.forEach((u) => u());
  }
}

// `target` null: the figure is information, with no target of its own.
function rows(bench: string, label: string, w: Window, target: number | null): Row[] {
  const flat = w.rssEnd <= w.rssStart * (1 + RSS_FLAT_GROWTH);
  const events = w.events === null ? "" : `, ${count(w.events / w.wallS)} events/s streamed`;
  console.log(`${label}: worker ${(w.cpu * 100).toFixed(2)} % of a core over ${w.wallS.toFixed(1)} s, ${count(w.steps / w.wallS)} steps/s seen${events}; bare Bun follower ${(w.bunCpu * 100).toFixed(2)} %; tail -f ${(w.tailCpu * 100).toFixed(2)} %; RSS ${mib(w.rssStart)} → ${mib(w.rssEnd)} (max ${mib(w.rssMax)})`);
  if (w.events === 0) throw new Error(`${label}: the open event stream received nothing in the window`);
  return [
    { bench, metric: `worker CPU, ${label}`, figure: `${(w.cpu * 100).toFixed(2)} % of a core`, baseline: `${(w.bunCpu * 100).toFixed(2)} % bare Bun follower, ${(w.tailCpu * 100).toFixed(2)} % tail -f`, ratio: ratio(w.cpu / w.bunCpu), target: target === null ? "" : `≤ ${target} %`, verdict: target === null ? "info" : verdict(w.cpu * 100, "<=", target) },
    { bench, metric: `worker RSS, ${label}`, figure: `${mib(w.rssStart)} → ${mib(w.rssEnd)}`, baseline: `max ${mib(w.rssMax)}`, ratio: ratio(w.rssEnd / w.rssStart), target: `flat (≤ +${RSS_FLAT_GROWTH * 100} %)`, verdict: flat ? "PASS" : "MISS" },
  ];
}

// Steady state: a balanced-tier run (1,500 steps, a verified checkpoint every 150) measured after its first
// REALISTIC_WARMUP_STEPS, once the runtime has compiled what following a run takes; then the same run with one
// event stream open.
async function realistic(binary?: string): Promise<{ alone: Window; streamed: Window }> {
  const tables = () => ({ trainer: { mode: "simulate", cancel_grace_seconds: 2 }, simulate: { seconds_per_step: 0.1 } });
  await using host = await startBenchWorker({ binary, tables });
  const id = await host.startJob({ tier: "balanced" });
  await host.waitForJob(id, (j) => j.step >= REALISTIC_WARMUP_STEPS, 60_000);
  const alone = await watchWindow(host, id, REALISTIC_WINDOW_S);
  return { alone, streamed: await watchWindow(host, id, REALISTIC_WINDOW_S, true) };
}

async function flood(binary?: string): Promise<Window> {
  await using host = await startBenchWorker({
    binary,
    tables: (tree) => ({ trainer: bunTrainer(tree, "tqdm-trainer.ts", ["--rate", String(FLOOD_RATE), "--seconds", "600"]) }),
  });
  const id = await host.startJob();
  await host.waitForJob(id, (j) => j.step >= 1);
  return await watchWindow(host, id, FLOOD_WINDOW_S);
}

export async function measure(): Promise<Row[]> {
  const bench = "2 supervisor overhead";
  const out: Row[] = [];
  for (const { label, binary } of builds()) {
    const { alone, streamed } = await realistic(binary);
    out.push(...rows(bench, `${label}10 steps/s`, alone, 0.5));
    out.push(...rows(bench, `${label}10 steps/s, one event stream open`, streamed, null));
    out.push(...rows(bench, `${label}flood ${count(FLOOD_RATE)} lines/s`, await flood(binary), 3));
  }
  return out;
}

if (import.meta.main) await runBench("2. supervisor CPU and memory", measure);
