import { existsSync, readdirSync, readFileSync } from "node:fs";
import { failedOutcome } from "../job.ts";
import type { Logger } from "../logger.ts";
import type { Job, JobStore } from "../store/job-store.ts";
import type { JobDir, JobDirs } from "../job-dir/job-dir.ts";
import {
  identify, isSameProcess, markedProcesses, type ProcessIdentity, readBootId, readProcStat,
} from "../os/proc.ts";
import type { Adoption, Identities, PendingStop } from "./placement.ts";
import { SLURM_SCRIPT } from "./slurm.ts";
import { sweepStrays } from "../os/terminate.ts";

interface ReconcileDeps {
  store: JobStore;
  dirs: JobDirs;
  now: () => Date;
  log: Logger;
}

// At start-up every process that carries the marker of a job of this state dir ends up supervised or gone,
// and no job stays "training" with nothing behind it. A job with anything alive (its shim or trainer as
// recorded, as its job files name them, or any process with its marker) is adopted and ends as if the
// worker had never restarted; a job the database lost is recorded again from its job.json and adopted.
export function reconcileOnStart(deps: ReconcileDeps, adopt: (adoption: Adoption) => void): void {
  const bootId = readBootId();
  const marked = markedProcesses();
  const settled = new Set<string>();
  for (const job of deps.store.activeJobs()) {
    settled.add(job.id);
    // Slurm holds a batch job's processes on whatever node, across its own restarts and ours: it says how it ends.
    if (job.slurm_job_id !== null || existsSync(deps.dirs.of(job.id).backendFile(SLURM_SCRIPT))) {
      deps.log.info("re-adopting job after restart", { job_id: job.id, slurm_job_id: job.slurm_job_id });
      const pendingStop = pendingStopOf(job, deps.now);
      adopt({ row: job, ids: { shim: null, trainer: null }, pendingStop, placedBy: "slurm" });
      continue;
    }
    const verdict = judge(job, deps.dirs.of(job.id), bootId, marked.get(job.id) ?? []);
    if (typeof verdict === "object") {
      const pids = { shim_pid: verdict.shim?.pid ?? null, pid: verdict.trainer?.pid ?? null };
      deps.log.info("re-adopting job after restart", { job_id: job.id, ...pids });
      recordIdentities(deps, job.id, verdict);
      adopt({ row: job, ids: verdict, pendingStop: pendingStopOf(job, deps.now), placedBy: "local" });
      continue;
    }
    failLeftover(deps, job, verdict);
  }
  for (const [id, pids] of marked) {
    const dir = deps.dirs.of(id);
    // A job directory elsewhere is another worker's (another state_dir) and none of ours.
    if (settled.has(id) || !dir.exists()) continue;
    const recovered = recover(deps, id, dir, pids);
    if (recovered) {
      deps.log.warn("re-adopting a running job the job database did not know", { job_id: id, pids });
      adopt(recovered);
      continue;
    }
    deps.log.warn("stopping processes of a job whose record is final or missing", { job_id: id, pids });
    void sweepStrays(id);
  }
  removeUnrecorded(deps, marked);
}

// A job the restart found with nothing running ends failed. One that never started a trainer keeps nothing: its
// dataset copy (a resume's links to its predecessor's) goes now, not with its directory at retention.
function failLeftover(deps: ReconcileDeps, job: Job, verdict: "host_rebooted" | "worker_restarted"): void {
  const dir = deps.dirs.of(job.id);
  const again = job.resumed_from === null ? "send the request again" : `resume job ${job.resumed_from} again`;
  const error = verdict === "host_rebooted"
    ? "the host rebooted while this job ran; its trainer is gone"
    : job.phase === "preparing"
    ? "the worker restarted while it copied this job's dataset, before any trainer was started; " +
      `nothing was trained: ${again}`
    : "the worker restarted while this job ran and its trainer was no longer running; " +
      "its exit status was not recorded";
  try {
    deps.store.finish(job.id, failedOutcome(verdict, error), deps.now().toISOString());
    deps.log.warn("failed job after restart", { job_id: job.id, error_code: verdict });
  } catch (err) {
    // Left active, the job keeps new trains out until a restart with a writable state dir records it.
    const fields = { job_id: job.id, error_code: verdict, error: (err as Error).message };
    deps.log.error("could not record a job that ended while the worker was away", fields);
    return;
  }
  if (job.started_at !== null || dir.readTrainer() !== null) return;
  try {
    dir.removeDataset();
  } catch (err) {
    const fields = { job_id: job.id, error: (err as Error).message };
    deps.log.error("could not remove the dataset copy of a job that never trained", fields);
  }
}

// A dispatch killed while it copied the dataset leaves a job directory that no record names, with no job.json
// and nothing running in it: removed before any request can start a new one. (A directory with a job.json is a
// job a lost database forgot: left for the operator.)
function removeUnrecorded(deps: ReconcileDeps, marked: Map<string, number[]>): void {
  let names: string[];
  try {
    names = readdirSync(deps.dirs.root);
  } catch {
    return;
  }
  for (const id of names) {
    const dir = deps.dirs.of(id);
    if (marked.has(id) || deps.store.get(id) !== null || dir.readJob() !== null) continue;
    try {
      dir.removeNow();
      deps.log.warn("removed a job directory no record names (a dispatch cut short)", { job_id: id });
    } catch (err) {
      deps.log.error("could not remove a job directory no record names", { job_id: id, error: (err as Error).message });
    }
  }
}

type Verdict = Identities | "host_rebooted" | "worker_restarted";

function judge(job: Job, dir: JobDir, bootId: string | null, marked: number[]): Verdict {
  const shim = liveShim(job, dir, marked);
  const ids = { shim, trainer: liveTrainer(job, dir, marked, shim) };
  if (dir.readExit() !== null || ids.shim || ids.trainer || marked.length > 0) return ids;
  if (job.boot_id !== null && job.boot_id !== bootId) return "host_rebooted";
  return "worker_restarted";
}

// A job alive in a directory of this state dir with no record: recorded again as it began, if its job.json says how.
function recover(deps: ReconcileDeps, id: string, dir: JobDir, marked: number[]): Adoption | null {
  const file = dir.readJob();
  if (file === null || deps.store.get(id) !== null) return null;
  const inserted = deps.store.insertRecovered({
    id, request: file.request, requestHash: file.request_hash, idempotencyKey: file.idempotency_key,
    admissionWarning: file.admission_warning, simulated: file.simulated, now: file.created_at, phase: "loading",
    logPath: dir.log, totalSteps: null, dataset: null,
  });
  if (!inserted) return null;
  const row = deps.store.get(id)!;
  const shim = liveShim(row, dir, marked);
  const ids = { shim, trainer: liveTrainer(row, dir, marked, shim) };
  recordIdentities(deps, id, ids);
  const placedBy = existsSync(dir.backendFile(SLURM_SCRIPT)) ? "slurm" : "local";
  return { row: deps.store.get(id)!, ids, pendingStop: null, placedBy };
}

// Found by files or marker, the processes go on record, as the launch would have put them (guarded: a recorded
// identity is not overwritten, the trainer's only while the job is "starting").
function recordIdentities(deps: ReconcileDeps, id: string, ids: Identities): void {
  try {
    const row = deps.store.get(id);
    if (ids.shim && row?.shim_pid === null) deps.store.markShim(id, ids.shim);
    if (ids.trainer && row?.pid === null) deps.store.markSpawned(id, ids.trainer, deps.now().toISOString());
  } catch (err) {
    deps.log.error("could not record the processes of a re-adopted job", { job_id: id, error: (err as Error).message });
  }
}

function liveShim(job: Job, dir: JobDir, marked: number[]): ProcessIdentity | null {
  const recorded = { pid: job.shim_pid ?? -1, startTicks: job.shim_start_ticks, bootId: job.boot_id };
  return alive(recorded) ?? alive(dir.readShim()) ?? shimAmong(marked, dir.dir);
}

function liveTrainer(job: Job, dir: JobDir, marked: number[], shim: ProcessIdentity | null): ProcessIdentity | null {
  const recorded = { pid: job.pid ?? -1, startTicks: job.pid_start_ticks, bootId: job.boot_id };
  return alive(recorded) ?? alive(dir.readTrainer()) ?? childOf(shim, marked);
}

// The trainer is the shim's one child, leader of its own process group.
function childOf(shim: ProcessIdentity | null, pids: number[]): ProcessIdentity | null {
  const pid = shim === null ? undefined : pids.find((p) => {
    const stat = readProcStat(p);
    return stat !== null && stat.ppid === shim.pid && stat.pgrp === p;
  });
  return pid === undefined ? null : identify(pid);
}

function alive(identity: ProcessIdentity | null): ProcessIdentity | null {
  return identity !== null && isSameProcess(identity) ? identity : null;
}

// A shim that had not yet written shim.json: known by its command line, "… shim <job dir>".
function shimAmong(pids: number[], dir: string): ProcessIdentity | null {
  const pid = pids.find((p) => {
    try {
      return readFileSync(`/proc/${p}/cmdline`, "utf8").split("\0").slice(-3).join(" ").endsWith(`shim ${dir} `);
    } catch {
      return false;
    }
  });
  return pid === undefined ? null : identify(pid);
}

function pendingStopOf(job: Job, now: () => Date): PendingStop | null {
  if (job.stop_reason === null) return null;
  const at = Date.parse(job.stop_requested_at ?? job.cancel_requested_at ?? "");
  return { reason: job.stop_reason, recordedAt: Number.isNaN(at) ? now().getTime() : at };
}
