import type { SafetensorsVerdict } from "../safetensors/verify.ts";
import type { Outcome, StopReason } from "../store/job-store.ts";
import type { ExitWatch } from "./exit-watch.ts";

export interface ExitFacts {
  ended: ExitWatch;
  stopReason: StopReason | null;
  forcedKill: boolean;
  lastLossNan: boolean;
  verdict: SafetensorsVerdict;
  outputFile: string;
  logTail: string[];
}

interface Failure {
  code: string;
  what: string;
}

interface Signature extends Failure {
  pattern: RegExp;
}

// Ordered: the first signature found in the log names the failure.
const SIGNATURES: Signature[] = [
  { code: "cuda_oom", pattern: /CUDA out of memory|torch\.(cuda\.)?OutOfMemoryError/, what: "the GPU ran out of memory (CUDA out of memory)" },
  { code: "disk_full", pattern: /No space left on device/, what: "the disk filled up (No space left on device)" },
  { code: "dataset_empty", pattern: /No data found\./, what: "sd-scripts found no training data (No data found.)" },
  { code: "base_model_invalid", pattern: /is neither a valid local path nor a valid repo id|Error while deserializing header|HeaderTooLarge|invalid load key/, what: "the base model could not be loaded" },
];

const STOPPED: Record<Exclude<StopReason, "cancel">, string> = {
  stalled: "the trainer printed nothing for longer than watchdog.stall_seconds and was stopped",
  timeout: "the run outlived its tier's wall-clock bound (watchdog.tier_timeout_seconds) and was stopped",
  nan_loss: "the loss was nan for watchdog.nan_updates consecutive updates; the run was stopped instead of burning the GPU",
};

const TAIL_IN_ERROR = 8;

export function decideOutcome(facts: ExitFacts): Outcome {
  const { ended } = facts;
  const exit = "exit_code" in ended ? { exit_code: ended.exit_code, signal: ended.signal } : { exit_code: null, signal: null };
  const base = { ...exit, forced_kill: facts.forcedKill, lora_path: null, lora_sha256: null, lora_bytes: null };
  const v = facts.verdict;
  if (exit.exit_code === 0 && v.ok) {
    return { ...base, status: "succeeded", error: null, error_code: null, lora_path: facts.outputFile, lora_sha256: v.sha256, lora_bytes: v.bytes };
  }
  if (facts.stopReason === "cancel") return { ...base, status: "cancelled", error: null, error_code: null };
  const failure = classify(facts, exit.exit_code, exit.signal);
  return { ...base, status: "failed", error_code: failure.code, error: `${failure.what}; ${exitText(ended)}.${tailText(facts.logTail)}` };
}

function classify(facts: ExitFacts, exitCode: number | null, signal: string | null): Failure {
  const { ended, verdict } = facts;
  if ("spawn_error" in ended) return { code: "spawn_failed", what: `the trainer could not be started: ${ended.spawn_error}` };
  if (facts.stopReason !== null && facts.stopReason !== "cancel") return { code: facts.stopReason, what: STOPPED[facts.stopReason] };
  const log = facts.logTail.join("\n");
  const found = SIGNATURES.find((s) => s.pattern.test(log));
  if (found) return found;
  if (facts.lastLossNan) return { code: "nan_loss", what: "the trainer stopped while its loss was nan" };
  if (signal === "SIGKILL") return { code: "host_oom_killed", what: "the trainer was killed by SIGKILL from outside the worker (most likely the kernel's OOM killer)" };
  if (exitCode === 0 && !verdict.ok && verdict.reason === "missing") return { code: "output_missing", what: `the trainer exited 0 but wrote no ${facts.outputFile}` };
  if (exitCode === 0 && !verdict.ok) return { code: "output_invalid", what: `the trainer exited 0 but ${facts.outputFile} is not a valid safetensors file: ${verdict.detail}` };
  if ("lost" in ended) return { code: "worker_restarted", what: "the trainer ended while its shim was gone, so its exit status was not recorded" };
  return { code: "trainer_crashed", what: "the trainer stopped with an error" };
}

function exitText(ended: ExitWatch): string {
  if ("lost" in ended) return "exit status unknown";
  if ("spawn_error" in ended) return "never started";
  return ended.signal ? `killed by ${ended.signal}` : `exit code ${ended.exit_code}`;
}

function tailText(tail: string[]): string {
  const last = tail.filter((l) => l.trim() !== "").slice(-TAIL_IN_ERROR);
  return last.length > 0 ? ` Last log lines:\n${last.join("\n")}` : "";
}
