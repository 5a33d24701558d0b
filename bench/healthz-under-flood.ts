// Issue 26 §5: the compiled worker's /healthz while its trainer floods the log and nobody follows the job, then
// across the run's end, when the worker reads the backlog nobody read and settles the run. Probes are sent on a
// fixed schedule whatever the answers (open loop), and each latency counts from the probe's scheduled moment, so a
// stall delays every probe due during it, as it would delay arbo's and the operator's requests.
// Baseline: the same probes to the same worker with no job. Rounds alternate; each side is judged by its best round.
import { startBenchWorker, bunTrainer, isTerminal } from "./lib/bench-host.ts";
import { builds, runBench, verdict, type Row } from "./lib/report.ts";
import { onSchedule } from "./lib/probe.ts";
import { ms, ratio, summarize } from "./lib/stats.ts";

// Tens of MB/s of tqdm redraws, more than the worker parses on a 2-core host: a backlog grows while it runs.
const FLOOD_MIB_PER_S = 64;
const FLOOD_S = 4;
// The probes start with the flood and go on past the trainer's end, until the job is settled and 1 s more.
const AFTER_END_MS = 1000;
const ROUNDS = 2;
const TARGET_P99_MS = 100;

interface Probes {
  flood: number[];
  end: number[];
  settledMs: number;
}

// One probe on the schedule until `done` says stop, each latency tagged with the phase `phase()` named when due.
async function probe(get: () => Promise<Response>, phase: () => "flood" | "end", done: () => boolean) {
  const samples = { flood: [] as number[], end: [] as number[] };
  await onSchedule(done, (due) => {
    const tag = phase();
    return get().then(async (res) => {
      if (res.status !== 200) throw new Error(`/healthz answered ${res.status}`);
      await res.arrayBuffer();
      samples[tag].push(performance.now() - due);
    });
  });
  return samples;
}

async function floodRound(binary: string | undefined): Promise<{ quiet: number[]; probes: Probes }> {
  const flood = ["/dev/stderr", String(FLOOD_MIB_PER_S), String(FLOOD_S), String(2 ** 40)];
  await using host = await startBenchWorker({ binary, tables: (tree) => ({ trainer: bunTrainer(tree, "log-flood.ts", flood) }) });
  const health = () => host.get("/healthz");
  const quietUntil = performance.now() + FLOOD_S * 1000;
  const quiet = (await probe(health, () => "flood", () => performance.now() > quietUntil)).flood;

  const id = await host.startJob();
  let ended = false;
  let endedAt = Number.POSITIVE_INFINITY;
  const started = performance.now();
  // The trainer's end is its own (FLOOD_S after it starts); the job is settled once its record is terminal.
  const watch = (async () => {
    for (;;) {
      await Bun.sleep(50);
      const job = await host.job(id);
      if (isTerminal(job)) {
        endedAt = performance.now();
        ended = true;
        return job;
      }
    }
  })();
  const samples = await probe(
    health,
    () => (performance.now() - started < FLOOD_S * 1000 ? "flood" : "end"),
    () => ended && performance.now() > endedAt + AFTER_END_MS,
  );
  const job = await watch;
  if (job.status !== "failed" || job.error_code !== "output_missing") throw new Error(`unexpected end: ${JSON.stringify(job)}`);
  return { quiet, probes: { ...samples, settledMs: endedAt - started } };
}

const p99 = (samples: number[]) => summarize(samples).p99;

export async function measure(): Promise<Row[]> {
  const out: Row[] = [];
  for (const { label, binary } of builds()) {
    const rounds: Array<{ quiet: number[]; probes: Probes }> = [];
    for (let i = 0; i < ROUNDS; i++) {
      const round = await floodRound(binary);
      rounds.push(round);
      const { quiet, probes } = round;
      const show = (s: number[]) => { const m = summarize(s); return `p50 ${ms(m.p50)} p99 ${ms(m.p99)} max ${ms(m.max)} (${s.length})`; };
      console.log(`${label}round ${i + 1}: idle ${show(quiet)} · flood ${show(probes.flood)} · end ${show(probes.end)}; settled ${ms(probes.settledMs)} after the start`);
    }
    const best = (pick: (r: (typeof rounds)[number]) => number[]) => rounds.map(pick).reduce((a, b) => (p99(b) < p99(a) ? b : a));
    const [quiet, flood, end] = [best((r) => r.quiet), best((r) => r.probes.flood), best((r) => r.probes.end)];
    const bench = "26.5 /healthz under a flood";
    const q = summarize(quiet);
    for (const [name, samples] of [[`while the trainer floods ${FLOOD_MIB_PER_S} MiB/s, nobody following`, flood], ["across the run's end (the backlog read, the run settled)", end]] as const) {
      const s = summarize(samples);
      out.push({ bench, metric: `${label}/healthz p99 ${name}`, figure: ms(s.p99), baseline: `${ms(q.p99)} idle`, ratio: ratio(s.p99 / q.p99), target: `< ${TARGET_P99_MS} ms`, verdict: verdict(s.p99, "<", TARGET_P99_MS) });
      out.push({ bench, metric: `${label}/healthz max ${name}`, figure: ms(s.max), baseline: `${ms(q.max)} idle`, ratio: ratio(s.max / q.max), target: "", verdict: "info" });
    }
  }
  return out;
}

if (import.meta.main) await runBench("26.5 /healthz under a log flood and at the run's end", measure);
