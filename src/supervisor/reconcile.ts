import type { Logger } from "../log/logger.ts";
import type { JobStore } from "../store/job-store.ts";
import { isSameProcess, readBootId } from "./proc-stat.ts";
import { terminateGroup } from "./process-group.ts";

export interface ReconcileDeps {
  store: JobStore;
  now: () => Date;
  log: Logger;
  graceMs: number;
}

// At start-up no job may stay "training" with nothing behind it. This version cannot re-adopt a
// trainer it did not spawn (its exit status would be lost), so a survivor is stopped, then failed.
export async function reconcileOrphans(deps: ReconcileDeps): Promise<void> {
  const bootId = readBootId();
  for (const job of deps.store.activeJobs()) {
    const rebooted = job.boot_id !== null && job.boot_id !== bootId;
    const identity = { pid: job.pid ?? -1, startTicks: job.pid_start_ticks, bootId: job.boot_id };
    const alive = job.pid !== null && !rebooted && isSameProcess(identity);
    if (alive) await terminateGroup(job.pid!, deps.graceMs);
    const code = rebooted ? "host_rebooted" : "worker_restarted";
    const error = rebooted
      ? "the host rebooted while this job ran; its trainer is gone"
      : alive
        ? `the worker restarted while this job ran; its trainer (pid ${job.pid}) was stopped because its outcome could no longer be observed`
        : "the worker restarted while this job ran and its trainer was no longer running";
    deps.store.finish(job.id, { status: "failed", error_code: code, error, exit_code: null, signal: null, forced_kill: false, lora_path: null, lora_sha256: null, lora_bytes: null }, deps.now().toISOString());
    deps.log.warn("reconciled job after restart", { job_id: job.id, error_code: code, trainer_was_alive: alive });
  }
}
