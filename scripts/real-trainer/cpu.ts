// What this CPU does with bf16, said at the start, and the pace a run steps at, said after each run: the harness's
// time is its steps' time, and a CPU that emulates bf16 steps several times slower than one that has it.
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { CheckFailed, mustRun } from "./steps.ts";

// The CPU flags that carry bf16 arithmetic in hardware: x86's AVX512-BF16 and AMX, Arm's BF16 extension.
const BF16_FLAGS = ["avx512_bf16", "amx_bf16", "bf16"];

/** The CPU's model and its bf16 flags, as /proc/cpuinfo names them. */
export function cpuBf16(): { model: string; flags: string[] } {
  const info = readFileSync("/proc/cpuinfo", "utf8");
  const model = /^(?:model name|Model)\s*:\s*(.+)$/m.exec(info)?.[1]?.trim() ?? "unknown CPU";
  const flags = new Set((/^(?:flags|Features)\s*:\s*(.+)$/m.exec(info)?.[1] ?? "").split(/\s+/));
  return { model, flags: BF16_FLAGS.filter((f) => flags.has(f)) };
}

/**
 * Where bf16 is in hardware the run keeps the recipe's bf16. Where it is emulated, the probe times the U-Net's kind
 * of work both ways on this CPU and cpu-accelerate trains in the faster (it names the change in the job's log).
 */
export async function choosePrecision(python: string, adapter: string, logs: string): Promise<string> {
  const { model, flags } = cpuBf16();
  const out = await mustRun([python, join(import.meta.dir, "precision-probe.py")], join(logs, "precision.log"));
  const probe = JSON.parse(out.trim().split("\n").at(-1) ?? "{}") as { bf16_ms?: number; fp32_ms?: number };
  if (probe.bf16_ms === undefined || probe.fp32_ms === undefined) throw new CheckFailed(`the probe said: ${out}`);
  const measured = `bf16 ${probe.bf16_ms} ms, fp32 ${probe.fp32_ms} ms a block`;
  const hardware = flags.length > 0;
  const fp32 = !hardware && probe.fp32_ms < probe.bf16_ms;
  const why = hardware
    ? `bf16 in hardware (${flags.join(", ")}): trains in bf16, as the recipe does`
    : `bf16 emulated (no ${BF16_FLAGS.join(" or ")}): ${fp32 ? "fp32 measured faster, trains in fp32" : "bf16 still measured faster, trains in bf16"}`;
  const choice = { precision: fp32 ? "fp32" : "bf16", why: `${model}: ${why}; ${measured}` };
  writeFileSync(join(adapter, "..", "cpu-accelerate.json"), JSON.stringify(choice));
  return choice.why;
}

/** The seconds a training step took, as tqdm last printed its rate in a job's log; null before any step. */
export function paceOf(log: string): number | null {
  if (!existsSync(log)) return null;
  const rates = [...readFileSync(log, "utf8").matchAll(/steps:[^\r\n]*?(\d+(?:\.\d+)?)(s\/it|it\/s)/g)];
  const last = rates.at(-1);
  if (last === undefined) return null;
  const value = Number(last[1]);
  return last[2] === "s/it" ? value : 1 / value;
}

/** "pace 6.2 s a step" for the jobs whose logs are given, or that none stepped. */
export function paceLine(logs: string[]): string {
  const paces = logs.map(paceOf).filter((p): p is number => p !== null);
  return paces.length === 0 ? "no step taken" : `pace ${paces.map((p) => p.toFixed(1)).join(", ")} s a step`;
}
