import { basename } from "node:path";
import { type ErrorCode, isCancel, type Outcome, type Phase, type StopReason } from "../job.ts";
import type { SafetensorsVerdict } from "../safetensors/verify.ts";
import type { ExitWatch, SchedulerVerdict } from "./exit-watch.ts";
import { decisiveLine, SIGNATURES, withoutLauncherFrames } from "./failure-signatures.ts";

interface ExitFacts {
  ended: ExitWatch;
  stopReason: StopReason | null;
  forcedKill: boolean;
  lastLossNan: boolean;
  verdict: SafetensorsVerdict;
  outputFile: string;
  logTail: string[];
  // How much the cgroup's oom_kill counter rose during the run; null where the host cannot say.
  oomKills: number | null;
  // The phase the run was in when it ended.
  phase: Phase;
  // Why the state dir is full as the run ends (it names it), or null while it has room.
  stateFull: string | null;
}

interface Failure {
  code: ErrorCode;
  what: string;
  // The log line that decided the code, when one did.
  line?: string;
}

const STOPPED: Record<Exclude<StopReason, "cancel" | "pause">, string> = {
  stalled: "the trainer printed nothing for longer than watchdog.stall_seconds and was stopped",
  timeout: "the run outlived its tier's wall-clock bound (watchdog.tier_timeout_seconds) and was stopped",
  nan_loss:
    "the loss was nan for watchdog.nan_updates consecutive updates; the run was stopped instead of burning the GPU",
};

const TAIL_IN_ERROR = 8;

export function decideOutcome(facts: ExitFacts): Outcome {
  const { ended } = facts;
  const exit = "exit_code" in ended
    ? { exit_code: ended.exit_code, signal: ended.signal }
    : { exit_code: null, signal: null };
  const base = { ...exit, forced_kill: facts.forcedKill, lora_path: null, lora_sha256: null, lora_bytes: null };
  const v = facts.verdict;
  if (exit.exit_code === 0 && v.ok && v.value.nonFinite.tensors === 0) {
    return {
      ...base,
      status: "succeeded",
      error: null,
      error_code: null,
      lora_path: facts.outputFile,
      lora_sha256: v.value.sha256,
      lora_bytes: v.value.bytes,
    };
  }
  if (isCancel(facts.stopReason)) return { ...base, status: "cancelled", error: null, error_code: null };
  const failure = whileSampling(classify(facts, exit.exit_code, exit.signal), facts.phase);
  const lead = failure.line ? `${failure.line}\n` : "";
  const error = `${lead}${failure.what}; ${exitText(ended)}.${tailText(facts.logTail)}`;
  return { ...base, status: "failed", error_code: failure.code, error };
}

const SCHEDULER_CODES: Record<SchedulerVerdict["scheduler"], ErrorCode> = {
  TIMEOUT: "timeout", OUT_OF_MEMORY: "host_oom_killed", NODE_FAIL: "node_failed", CANCELLED: "trainer_crashed",
};

function classify(facts: ExitFacts, exitCode: number | null, signal: string | null): Failure {
  const { ended, verdict } = facts;
  if ("spawn_error" in ended) {
    return { code: "spawn_failed", what: `the trainer could not be started: ${ended.spawn_error}` };
  }
  if ("scheduler" in ended) return { code: SCHEDULER_CODES[ended.scheduler], what: ended.detail };
  const reason = facts.stopReason;
  if (reason !== null && reason !== "cancel" && reason !== "pause") return { code: reason, what: STOPPED[reason] };
  const found = SIGNATURES.find((s) => s.pattern.test(facts.logTail.join("\n")));
  const line = found ? (decisiveLine(facts.logTail, found.lead ?? found.pattern) ?? undefined) : undefined;
  if (found?.code === "host_oom_killed") return killedFromOutside(facts, line);
  if (found) return { code: found.code, what: found.what, line };
  if (facts.lastLossNan) return { code: "nan_loss", what: "the trainer stopped while its loss was nan" };
  if (signal === "SIGKILL" || (exitCode !== 0 && (facts.oomKills ?? 0) > 0)) return killedFromOutside(facts);
  // A trainer that cannot write its log cannot say why it stopped: the full disk under it is the reason.
  if (facts.stateFull !== null && exitCode !== null) {
    return { code: "disk_full", what: `${facts.stateFull}; the trainer could not write its run directory or its log` };
  }
  // Named by its file name: the trainer wrote it in the job's run directory, and errors quote no resolved path.
  if (exitCode === 0) return unusableOutput(verdict, basename(facts.outputFile));
  if ("lost" in ended) {
    return {
      code: "worker_restarted",
      what: "the trainer ended while its shim was gone, so its exit status was not recorded",
    };
  }
  return { code: "trainer_crashed", what: "the trainer stopped with an error" };
}

// The first sample after a checkpoint is where a card that trained fine runs out of memory: said, so arbo can
// retry without samples.
function whileSampling(failure: Failure, phase: Phase): Failure {
  if (failure.code !== "cuda_oom" || phase !== "sampling") return failure;
  const when = "while taking preview samples (phase sampling; a retry without samples needs less)";
  return { ...failure, what: `${failure.what}, ${when}` };
}

// An exit 0 is a success only with a LoRA that is whole and finite.
function unusableOutput(verdict: SafetensorsVerdict, file: string): Failure {
  if (verdict.ok) {
    const { tensors, names } = verdict.value.nonFinite;
    const what =
      `the trainer exited 0 but ${tensors} tensor(s) of ${file} hold NaN or Inf (${names.join(", ")}); ` +
      "the LoRA is unusable";
    return { code: "nan_loss", what };
  }
  if (verdict.error.reason === "missing") {
    return { code: "output_missing", what: `the trainer exited 0 but wrote no ${file}` };
  }
  const what = `the trainer exited 0 but ${file} is not a valid safetensors file: ${verdict.error.detail}`;
  return { code: "output_invalid", what };
}

// The strongest evidence decides, and the error says which: the cgroup's OOM counter is proof; a SIGKILL
// alone is not, and with a counter that did not rise it was something else.
function killedFromOutside(facts: ExitFacts, line?: string): Failure {
  const { oomKills } = facts;
  if (oomKills !== null && oomKills > 0) {
    const what =
      "the kernel's OOM killer killed the trainer " +
      `(proof: the oom_kill counter of the worker's cgroup rose by ${oomKills} during the run)`;
    return { code: "host_oom_killed", line, what };
  }
  if (oomKills === 0) {
    const what =
      "the trainer was killed by SIGKILL from outside the worker, not by the OOM killer " +
      "(the oom_kill counter of the worker's cgroup did not rise)";
    return { code: "trainer_crashed", line, what };
  }
  const what =
    "the trainer was killed by SIGKILL from outside the worker, most likely by the kernel's OOM killer " +
    "(evidence: the SIGKILL alone; this host counts no OOM kills for the worker's cgroup to prove it)";
  return { code: "host_oom_killed", line, what };
}

function exitText(ended: ExitWatch): string {
  if ("lost" in ended) return "exit status unknown";
  if ("scheduler" in ended) return `Slurm state ${ended.scheduler}`;
  if ("spawn_error" in ended) return "never started";
  return ended.signal ? `killed by ${ended.signal}` : `exit code ${ended.exit_code}`;
}

function tailText(tail: string[]): string {
  const last = withoutLauncherFrames(tail).filter((l) => l.trim() !== "").slice(-TAIL_IN_ERROR);
  return last.length > 0 ? ` Last log lines:\n${last.join("\n")}` : "";
}
