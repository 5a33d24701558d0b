import { describe, expect, test } from "bun:test";
import type { ErrorCode, JobStatus } from "../../src/job.ts";
import { decideOutcome } from "../../src/supervisor/outcome.ts";

// The rule that turns a run's end into its outcome, alone: a row of facts in, a status and code out. The whole-run
// failure-taxonomy test proves the facts reach it; this table pins the order in which they win.
type Facts = Parameters<typeof decideOutcome>[0];

const finite = { tensors: 0, names: [] };
const whole = { ok: true as const, value: { bytes: 10, sha256: "ab", tensorCount: 1, metadata: {}, nonFinite: finite } };
const poisoned = { ok: true as const, value: { ...whole.value, nonFinite: { tensors: 2, names: ["a", "b"] } } };
const missing = { ok: false as const, error: { reason: "missing" as const, detail: "no such file" } };
const invalid = { ok: false as const, error: { reason: "invalid" as const, detail: "header is not JSON" } };

const base: Facts = {
  ended: { exit_code: 0, signal: null, ended_at: "2026-01-01T00:00:00Z" },
  stopReason: null,
  forcedKill: false,
  lastLossNan: false,
  verdict: whole,
  outputFile: "/run/fast.safetensors",
  logTail: ["steps: 100%|██████████| 400/400", "model saved."],
  oomKills: null,
  phase: "done",
  stateFull: null,
};
const exited = (exit_code: number | null, signal: string | null = null) =>
  ({ exit_code, signal, ended_at: "2026-01-01T00:00:00Z" });

const ROWS: Array<[string, Partial<Facts>, JobStatus, ErrorCode | null]> = [
  ["exit 0 with a whole, finite LoRA succeeds", {}, "succeeded", null],
  ["exit 0 with a whole LoRA succeeds even after a cancel was asked", { stopReason: "cancel" }, "succeeded", null],
  ["a cancel that stopped the run is cancelled", {
    ended: exited(1), verdict: missing, stopReason: "cancel",
  }, "cancelled", null],
  ["a pause that stopped the run is cancelled", { ended: exited(null, "SIGTERM"), stopReason: "pause" }, "cancelled", null],
  ["a watchdog's stop names the watchdog", { ended: exited(null, "SIGTERM"), stopReason: "stalled" }, "failed", "stalled"],
  ["a spawn error outranks everything in the log", {
    ended: { spawn_error: "ENOENT", ended_at: "x" }, logTail: ["CUDA out of memory"],
  }, "failed", "spawn_failed"],
  ["Slurm's time limit is a timeout", { ended: { scheduler: "TIMEOUT", detail: "d" } }, "failed", "timeout"],
  ["Slurm's NODE_FAIL is node_failed", { ended: { scheduler: "NODE_FAIL", detail: "d" } }, "failed", "node_failed"],
  ["a log signature decides before the loss", {
    ended: exited(1), verdict: missing, lastLossNan: true, logTail: ["torch.OutOfMemoryError: CUDA out of memory."],
  }, "failed", "cuda_oom"],
  ["a nan loss at a crash with no signature is nan_loss", { ended: exited(1), lastLossNan: true }, "failed", "nan_loss"],
  ["SIGKILL with the cgroup's counter risen is host_oom_killed", {
    ended: exited(null, "SIGKILL"), oomKills: 1,
  }, "failed", "host_oom_killed"],
  ["SIGKILL with the counter still is trainer_crashed", {
    ended: exited(null, "SIGKILL"), oomKills: 0,
  }, "failed", "trainer_crashed"],
  ["a full state dir explains a silent crash", {
    ended: exited(1), stateFull: "the state dir is full",
  }, "failed", "disk_full"],
  ["exit 0 without a LoRA is output_missing", { verdict: missing }, "failed", "output_missing"],
  ["exit 0 with a broken LoRA is output_invalid", { verdict: invalid }, "failed", "output_invalid"],
  ["exit 0 with NaN weights is nan_loss", { verdict: poisoned }, "failed", "nan_loss"],
  ["sd-scripts' 'No data found.' exits 0 and is dataset_empty", {
    verdict: missing, logTail: ["No data found."],
  }, "failed", "dataset_empty"],
  ["an end nobody recorded is worker_restarted", {
    ended: { lost: true }, verdict: missing,
  }, "failed", "worker_restarted"],
  ["any other error exit is trainer_crashed", { ended: exited(1), verdict: missing }, "failed", "trainer_crashed"],
];

describe("the outcome rule", () => {
  test.each(ROWS)("%s", (_name, facts, status, code) => {
    const outcome = decideOutcome({ ...base, ...facts });
    expect<{ status: JobStatus; error_code: ErrorCode | null }>({ status: outcome.status, error_code: outcome.error_code })
      .toEqual({ status, error_code: code });
  });

  test("a CUDA OOM while sampling says a retry without samples needs less", () => {
    const oom = ["CUDA out of memory"];
    const facts = { ...base, ended: exited(1), verdict: missing, phase: "sampling" as const, logTail: oom };
    expect(decideOutcome(facts).error).toContain("while taking preview samples");
    // Contrast: the same OOM while training does not.
    expect(decideOutcome({ ...facts, phase: "training" }).error).not.toContain("preview samples");
  });

  test("contrast: the table's facts matter — a success row with a crash's exit is no success", () => {
    expect(decideOutcome({ ...base, ended: exited(1) }).status).toBe("failed");
  });
});
