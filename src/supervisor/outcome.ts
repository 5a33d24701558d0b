import type { SafetensorsVerdict } from "../safetensors/verify.ts";
import type { Outcome } from "../store/job-store.ts";

export interface ExitFacts {
  exitCode: number | null;
  signal: string | null;
  cancelRequested: boolean;
  forcedKill: boolean;
  killedBySupervisor: boolean;
  verdict: SafetensorsVerdict;
  outputFile: string;
  logTail: string[];
}

interface Signature {
  code: string;
  pattern: RegExp;
  what: string;
}

// Ordered: the first signature found in the log names the failure.
const SIGNATURES: Signature[] = [
  { code: "cuda_oom", pattern: /CUDA out of memory|torch\.(cuda\.)?OutOfMemoryError/, what: "the GPU ran out of memory (CUDA out of memory)" },
  { code: "disk_full", pattern: /No space left on device/, what: "the disk filled up (No space left on device)" },
  { code: "dataset_empty", pattern: /No data found\./, what: "sd-scripts found no training data (No data found.)" },
  { code: "base_model_invalid", pattern: /is neither a valid local path nor a valid repo id|Error while deserializing header|HeaderTooLarge|invalid load key/, what: "the base model could not be loaded" },
];

const TAIL_IN_ERROR = 8;

export function decideOutcome(facts: ExitFacts): Outcome {
  const base = { exit_code: facts.exitCode, signal: facts.signal, forced_kill: facts.forcedKill, lora_path: null, lora_sha256: null, lora_bytes: null };
  const succeeded = facts.exitCode === 0 && facts.verdict.ok;
  if (facts.cancelRequested && !succeeded) return { ...base, status: "cancelled", error: null, error_code: null };
  if (succeeded && facts.verdict.ok) {
    const v = facts.verdict;
    return { ...base, status: "succeeded", error: null, error_code: null, lora_path: facts.outputFile, lora_sha256: v.sha256, lora_bytes: v.bytes };
  }
  const failure = classify(facts);
  return { ...base, status: "failed", error_code: failure.code, error: `${failure.what}; ${exitText(facts)}.${tailText(facts.logTail)}` };
}

function classify(facts: ExitFacts): { code: string; what: string } {
  const log = facts.logTail.join("\n");
  const found = SIGNATURES.find((s) => s.pattern.test(log));
  if (found) return found;
  if (facts.signal === "SIGKILL" && !facts.killedBySupervisor) return { code: "host_oom_killed", what: "the trainer was killed by SIGKILL from outside the worker (most likely the kernel's OOM killer)" };
  if (facts.exitCode === 0 && !facts.verdict.ok && facts.verdict.reason === "missing") {
    return { code: "output_missing", what: `the trainer exited 0 but wrote no ${facts.outputFile}` };
  }
  if (facts.exitCode === 0 && !facts.verdict.ok) return { code: "output_invalid", what: `the trainer exited 0 but ${facts.outputFile} is not a valid safetensors file: ${facts.verdict.detail}` };
  return { code: "trainer_crashed", what: "the trainer stopped with an error" };
}

function exitText(facts: ExitFacts): string {
  return facts.signal ? `killed by ${facts.signal}` : `exit code ${facts.exitCode}`;
}

function tailText(tail: string[]): string {
  const last = tail.filter((l) => l.trim() !== "").slice(-TAIL_IN_ERROR);
  return last.length > 0 ? ` Last log lines:\n${last.join("\n")}` : "";
}
