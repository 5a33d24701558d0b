import { writeFileSync } from "node:fs";
import { cleanUpOnSignals } from "./cleanup.ts";

// One line of a benchmark's findings: what was measured, against what, and whether it meets the target.
export interface Row {
  bench: string;
  metric: string;
  figure: string;
  baseline: string;
  ratio: string;
  target: string;
  verdict: "PASS" | "MISS" | "info" | "ERROR";
}

export type Op = "<=" | ">=" | "<";

export function verdict(value: number, op: Op, limit: number): "PASS" | "MISS" {
  const ok = op === "<=" ? value <= limit : op === ">=" ? value >= limit : value < limit;
  return ok && Number.isFinite(value) ? "PASS" : "MISS";
}

const COLUMNS: Array<[keyof Row, string]> = [
  ["bench", "bench"],
  ["metric", "metric"],
  ["figure", "figure"],
  ["baseline", "baseline (same run)"],
  ["ratio", "ratio"],
  ["target", "target"],
  ["verdict", ""],
];

export function formatTable(rows: readonly Row[]): string {
  const widths = COLUMNS.map(([key, title]) => Math.max(title.length, ...rows.map((r) => r[key].length)));
  const line = (cells: string[]) => cells.map((c, i) => c.padEnd(widths[i]!)).join("  ").trimEnd();
  return [line(COLUMNS.map(([, t]) => t)), line(widths.map((w) => "-".repeat(w))), ...rows.map((r) => line(COLUMNS.map(([k]) => r[k])))].join("\n");
}

// The builds a script measures: this tree's, then, when BENCH_BEFORE names another build's binary (the commit
// before a change, say), that one, its rows labelled "before: ".
export function builds(): Array<{ label: string; binary?: string }> {
  const before = process.env.BENCH_BEFORE;
  return before ? [{ label: "" }, { label: "before: ", binary: before }] : [{ label: "" }];
}

// The suite runner reads a script's rows from BENCH_RESULT_FILE; alone, a script just prints them.
export async function runBench(title: string, measure: () => Promise<Row[]>): Promise<void> {
  cleanUpOnSignals();
  const started = performance.now();
  console.log(`\n== ${title}`);
  const rows = await measure();
  console.log(`\n${formatTable(rows)}\n(${((performance.now() - started) / 1000).toFixed(1)} s)`);
  const out = process.env.BENCH_RESULT_FILE;
  if (out) writeFileSync(out, JSON.stringify(rows));
}
