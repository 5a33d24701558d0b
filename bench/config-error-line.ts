// Issue 48: how long a 1 MB config whose TOML fault is on its last lines takes to be refused with its line. Each
// finder runs in a process of its own on the same file (time and peak RSS of that process): this tree's, which halves
// on line prefixes, and the one before (bench/lib/toml-error-before.ts, a parse of every prefix: 28.7 s and 199 MiB
// in the issue). Then the compiled binary's refusal of that file (`tokenizers check`, exit 78), against its refusal
// of the same megabyte that parses but holds an unknown key (one parse, no line to find).
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { tomlErrorAt } from "../src/config/toml.ts";
import { ensureBinary } from "../test/support/binary.ts";
import { bigConfig, lineOf } from "../test/support/big-config.ts";
import { tomlErrorAtBefore } from "./lib/toml-error-before.ts";
import { runBench, verdict, type Row } from "./lib/report.ts";
import { median, mib, ms, ratio } from "./lib/stats.ts";

const ROUNDS = 5;
const TARGET_MS = 500;
const FAULT = 'nvidia_smi = = "x"';
const HEAD = 'listen = "127.0.0.1:0"\n';

interface Finding { ms: number; maxRss: number; line: number | null }

// Child: find the fault's line in FILE with one finder, print what it took.
function child(which: string, file: string): void {
  const text = readFileSync(file, "utf8");
  let message = "";
  try {
    Bun.TOML.parse(text);
  } catch (err) {
    message = (err as Error).message.replace(/^TOML Parse error: /, "");
  }
  const started = performance.now();
  const at = which === "new" ? tomlErrorAt(text, message) : tomlErrorAtBefore(text, message);
  const finding: Finding = { ms: performance.now() - started, maxRss: process.resourceUsage().maxRSS * 1024, line: at?.line ?? null };
  process.stdout.write(JSON.stringify(finding));
}

function find(which: "new" | "before", file: string): Finding {
  const run = Bun.spawnSync([process.execPath, import.meta.path, "--child", which, file], { stderr: "inherit" });
  if (run.exitCode !== 0) throw new Error(`the ${which} finder exited ${run.exitCode}`);
  return JSON.parse(run.stdout.toString()) as Finding;
}

// The binary's refusal of `file`: wall time to its exit 78 and its peak RSS.
function refusal(binary: string, file: string): { ms: number; maxRss: number; stderr: string } {
  const started = performance.now();
  const run = Bun.spawnSync([binary, "tokenizers", "check", "--config", file], { env: { PATH: process.env.PATH } });
  const took = performance.now() - started;
  if (run.exitCode !== 78) throw new Error(`expected exit 78, got ${run.exitCode}: ${run.stderr.toString()}`);
  return { ms: took, maxRss: run.resourceUsage.maxRSS * 1024, stderr: run.stderr.toString() };
}

async function measure(): Promise<Row[]> {
  const dir = mkdtempSync(join(tmpdir(), "lora-worker-bench-config-"));
  try {
    const faulty = join(dir, "faulty.toml");
    const text = bigConfig(HEAD, `[trainer]\nmode = "simulate"\n[gpu]\n${FAULT}\n# the end\n`);
    writeFileSync(faulty, text);
    const unknown = join(dir, "unknown-key.toml");
    writeFileSync(unknown, bigConfig(HEAD, `[trainer]\nmode = "simulate"\ncolour = "blue"\n`));
    const line = lineOf(text, FAULT);
    console.log(`${mib(text.length)}, ${text.split("\n").length} lines, the fault on line ${line}`);
    const news = Array.from({ length: ROUNDS }, () => find("new", faulty));
    const before = find("before", faulty);
    if (news.some((f) => f.line !== line) || before.line !== line) throw new Error(`a finder named another line than ${line}`);
    const now = { ms: median(news.map((f) => f.ms)), maxRss: median(news.map((f) => f.maxRss)) };
    console.log(`halving: ${ms(now.ms)}, ${mib(now.maxRss)} (median of ${ROUNDS}); every prefix: ${ms(before.ms)}, ${mib(before.maxRss)}`);
    const binary = ensureBinary();
    const refusals = Array.from({ length: ROUNDS }, () => refusal(binary, faulty));
    const plain = Array.from({ length: ROUNDS }, () => refusal(binary, unknown));
    if (!refusals[0]!.stderr.includes(`line ${line}, column 14`)) throw new Error(`the binary said: ${refusals[0]!.stderr}`);
    const binaryMs = median(refusals.map((r) => r.ms));
    const plainMs = median(plain.map((r) => r.ms));
    const bench = "48 config error line";
    return [
      { bench, metric: "the fault's line found, 1 MB, fault on its last lines", figure: ms(now.ms), baseline: `${ms(before.ms)} every prefix parsed`, ratio: ratio(now.ms / before.ms), target: `< ${TARGET_MS} ms`, verdict: verdict(now.ms, "<", TARGET_MS) },
      { bench, metric: "peak RSS of the finding process", figure: mib(now.maxRss), baseline: `${mib(before.maxRss)} every prefix parsed`, ratio: ratio(now.maxRss / before.maxRss), target: "", verdict: "info" },
      { bench, metric: "binary: exec → exit 78 naming the line (median)", figure: ms(binaryMs), baseline: `${ms(plainMs)} same MB, an unknown key`, ratio: ratio(binaryMs / plainMs), target: "", verdict: "info" },
    ];
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

if (import.meta.main) {
  const [flag, which, file] = process.argv.slice(2);
  if (flag === "--child") child(which!, file!);
  else await runBench("48 finding a TOML fault's line in a 1 MB config", measure);
}
