// Issue 11 item 6: GET /healthz from a separate process to a Bun.serve that shares its process, and so its event
// loop, with a log follower while a trainer floods the log faster than it is parsed. Baseline: the same server with no flood.
// Contrast (info): the same flood followed by a reader that reads to EOF in one go, as the follower did before.
// Rounds alternate so drift on a noisy host hits every side; each side is judged by its best round.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { LineSplitter } from "../src/progress/tracker.ts";
import { applyLine, initialProgress } from "../src/progress/progress.ts";
import { followLog } from "../src/supervisor/job-log.ts";
import { WATCHED_TICK_MS } from "../src/supervisor/run.ts";
import { trackPid, trackScratch } from "./lib/cleanup.ts";
import { followToEof } from "./lib/eof-follower.ts";
import { runLoad } from "./lib/load-client.ts";
import type { LoadResult } from "./lib/load-gen.ts";
import { runBench, verdict, type Row } from "./lib/report.ts";
import { mib, ms, ratio } from "./lib/stats.ts";

const FLOOD = join(import.meta.dir, "lib/log-flood.ts");
// Tens of MB/s, as the trainer wrote: more than the supervisor parses (~30 MiB/s on a 2-core host).
const FLOOD_MIB_PER_S = 64;
const CAP_BYTES = 1024 * 2 ** 20;
const ROUND_MS = 3000;
const WARMUP_MS = 300;
const ROUNDS = 2;
const TARGET_P99_MS = 50;

type Follow = (path: string, onText: (text: string) => void) => { drain(): void; stop(): unknown };

interface Round {
  load: LoadResult;
  writtenPerS: number;
  deliveredPerS: number;
}

// What the supervisor does with the text (run.ts): split records, fold progress.
function progressSink() {
  const splitter = new LineSplitter();
  let progress = initialProgress(1_000_000);
  let bytes = 0;
  const onText = (text: string) => {
    bytes += Buffer.byteLength(text);
    for (const line of splitter.push(text)) progress = applyLine(progress, line);
  };
  return { onText, bytes: () => bytes, step: () => progress.step };
}

async function load(url: string): Promise<LoadResult> {
  const result = await runLoad({ mode: "closed", url, path: "/healthz", headers: {}, connections: 1, durationMs: ROUND_MS, warmupMs: WARMUP_MS });
  if (Object.keys(result.statuses).some((s) => s !== "200")) throw new Error(`non-200 answers: ${JSON.stringify(result.statuses)}`);
  return result;
}

async function floodRound(dir: string, url: string, follow: Follow): Promise<Round> {
  const path = join(dir, "train.log");
  writeFileSync(path, "");
  const sink = progressSink();
  const follower = follow(path, sink.onText);
  const writer = Bun.spawn([process.execPath, FLOOD, path, String(FLOOD_MIB_PER_S), String((WARMUP_MS + ROUND_MS) / 1000 + 0.5), String(CAP_BYTES)], { stdout: "pipe" });
  const untrack = trackPid(writer.pid);
  const t0 = performance.now();
  try {
    const result = await load(url);
    const deliveredPerS = sink.bytes() / ((performance.now() - t0) / 1000);
    const flood = JSON.parse(await new Response(writer.stdout).text()) as { written: number; seconds: number };
    if (sink.step() === 0) throw new Error("the follower parsed no step of the flood");
    return { load: result, writtenPerS: flood.written / flood.seconds, deliveredPerS };
  } finally {
    writer.kill("SIGKILL");
    untrack();
    await follower.stop();
    rmSync(path, { force: true });
  }
}

const best = (rounds: Round[]) => rounds.reduce((a, b) => (b.load.latency.p99 < a.load.latency.p99 ? b : a));
const show = (r: Round) => `p50 ${ms(r.load.latency.p50)} p99 ${ms(r.load.latency.p99)} max ${ms(r.load.latency.max)} (${r.load.requests} answers)`;
const perS = (bytes: number) => `${mib(bytes)}/s`;

export async function measure(): Promise<Row[]> {
  const dir = mkdtempSync(join(tmpdir(), "lora-worker-bench-flood-"));
  const untrack = trackScratch(dir);
  using server = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => Response.json({ ok: true }) });
  const sides = { quiet: [] as Round[], sliced: [] as Round[], eof: [] as Round[] };
  try {
    for (let i = 0; i < ROUNDS; i++) {
      sides.quiet.push({ load: await load(server.url.href), writtenPerS: 0, deliveredPerS: 0 });
      sides.sliced.push(await floodRound(dir, server.url.href, (path, onText) => followLog(path, onText, () => WATCHED_TICK_MS)));
      sides.eof.push(await floodRound(dir, server.url.href, followToEof));
      const [q, s, e] = [sides.quiet.at(-1)!, sides.sliced.at(-1)!, sides.eof.at(-1)!];
      console.log(`round ${i + 1}: no flood ${show(q)} · followLog ${show(s)}, read ${perS(s.deliveredPerS)} of ${perS(s.writtenPerS)} · to EOF ${show(e)}, read ${perS(e.deliveredPerS)} of ${perS(e.writtenPerS)}`);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
    untrack();
  }
  return rows(best(sides.quiet), best(sides.sliced), best(sides.eof));
}

function rows(quiet: Round, sliced: Round, eof: Round): Row[] {
  const bench = "11.6 follower starvation";
  const [q, s, e] = [quiet.load.latency, sliced.load.latency, eof.load.latency];
  return [
    { bench, metric: `/healthz p99 under a ${FLOOD_MIB_PER_S} MiB/s flood`, figure: ms(s.p99), baseline: `${ms(q.p99)} no flood`, ratio: ratio(s.p99 / q.p99), target: `< ${TARGET_P99_MS} ms`, verdict: verdict(s.p99, "<", TARGET_P99_MS) },
    { bench, metric: "/healthz p50 under the flood", figure: ms(s.p50), baseline: `${ms(q.p50)} no flood`, ratio: ratio(s.p50 / q.p50), target: "", verdict: "info" },
    { bench, metric: "/healthz max under the flood", figure: ms(s.max), baseline: `${ms(q.max)} no flood`, ratio: ratio(s.max / q.max), target: "", verdict: "info" },
    { bench, metric: "log read and parsed under the flood", figure: perS(sliced.deliveredPerS), baseline: `${perS(sliced.writtenPerS)} written`, ratio: ratio(sliced.deliveredPerS / sliced.writtenPerS), target: "", verdict: "info" },
    { bench, metric: "contrast: read to EOF, /healthz p99", figure: ms(e.p99), baseline: `${ms(q.p99)} no flood`, ratio: ratio(e.p99 / q.p99), target: "", verdict: "info" },
    { bench, metric: "contrast: read to EOF, /healthz max", figure: ms(e.max), baseline: `${ms(q.max)} no flood`, ratio: ratio(e.max / q.max), target: "", verdict: "info" },
  ];
}

if (import.meta.main) await runBench("11.6 follower starvation", measure);
