import type { Logger } from "../log/logger.ts";
import type { JobRow, JobStore } from "../store/job-store.ts";
import { jobDirOf } from "./job-dir.ts";
import { readExit } from "./job-files.ts";
import { isSameProcess, readBootId } from "./proc-stat.ts";

export interface ReconcileDeps {
  store: JobStore;
  now: () => Date;
  log: Logger;
}

// At start-up no job may stay "training" with nothing behind it. A job whose shim or trainer is
// the same process as recorded (pid, start time, boot), or whose exit the shim already recorded,
// is adopted and ends as if the worker had never restarted; anything else is failed.
export function reconcileOnStart(deps: ReconcileDeps, adopt: (row: JobRow) => void): void {
  const bootId = readBootId();
  for (const job of deps.store.activeJobs()) {
    const verdict = judge(job, bootId);
    if (verdict === "adopt") {
      deps.log.info("re-adopting job after restart", { job_id: job.id, pid: job.pid });
      adopt(job);
      continue;
    }
    const error = verdict === "host_rebooted" ? "the host rebooted while this job ran; its trainer is gone" : "the worker restarted while this job ran and its trainer was no longer running; its exit status was not recorded";
    deps.store.finish(job.id, { status: "failed", error_code: verdict, error, exit_code: null, signal: null, forced_kill: false, lora_path: null, lora_sha256: null, lora_bytes: null }, deps.now().toISOString());
    deps.log.warn("failed job after restart", { job_id: job.id, error_code: verdict });
  }
}

function judge(job: JobRow, bootId: string | null): "adopt" | "host_rebooted" | "worker_restarted" {
  if (readExit(jobDirOf(job)) !== null) return "adopt";
  if (job.boot_id !== null && job.boot_id !== bootId) return "host_rebooted";
  const shim = { pid: job.shim_pid ?? -1, startTicks: job.shim_start_ticks, bootId: job.boot_id ?? bootId };
  const trainer = { pid: job.pid ?? -1, startTicks: job.pid_start_ticks, bootId: job.boot_id };
  return isSameProcess(shim) || isSameProcess(trainer) ? "adopt" : "worker_restarted";
}
