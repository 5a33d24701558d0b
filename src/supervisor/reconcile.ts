import { readdirSync } from "node:fs";
import { failedOutcome } from "../job.ts";
import type { Logger } from "../logger.ts";
import type { Job, JobStore } from "../store/job-store.ts";
import type { JobDir, JobDirs, PlacementFile } from "../job-dir/job-dir.ts";
import { markedProcesses } from "../os/proc.ts";
import type { Backends } from "./backend.ts";
import type { Backend, Found, Gone, PendingStop, RecordedPlacement } from "./placement.ts";
import { sweepStrays } from "../os/terminate.ts";
import { jobsWithTmpLinks, unlinkTmp } from "../job-dir/tmp-link.ts";

interface ReconcileDeps {
  store: JobStore;
  dirs: JobDirs;
  backends: Backends;
  now: () => Date;
  log: Logger;
}

// At start-up every process that carries the marker of a job of this state dir ends up supervised or gone,
// and no job stays "training" with nothing behind it. Each active job is handed back to the backend that placed it
// (the supervisor asks it, and adopts what it finds: the run then ends as if the worker had never restarted); a job
// the database lost is recorded again from its job.json and handed back too. A job no backend can take back ends
// here. What is handed back, and the marked processes found, are the answer: the supervisor asks each backend in
// turn, then clearAfterRestart removes what no run needs.
export function reconcileOnStart(deps: ReconcileDeps): Reconciled {
  const marked = markedProcesses();
  const handled = new Set<string>();
  const handbacks: Handback[] = [];
  const take = (row: Job, pids: number[], pendingStop: PendingStop | null, recordedAgain: boolean) => {
    const judged = handBack(deps, row, pids);
    if ("gone" in judged) endLeftover(deps, row, judged, pids);
    else handbacks.push({ ...judged, pendingStop, recordedAgain });
  };
  for (const job of deps.store.activeJobs()) {
    handled.add(job.id);
    take(job, marked.get(job.id) ?? [], pendingStopOf(job, deps.now), false);
  }
  for (const [id, pids] of marked) {
    const dir = deps.dirs.of(id);
    // A job directory elsewhere is another worker's (another state_dir) and none of ours.
    if (handled.has(id) || !dir.exists()) continue;
    const row = recordAgain(deps, id, dir);
    if (row !== null) {
      take(row, pids, null, true);
      continue;
    }
    deps.log.warn("stopping processes of a job whose record is final or missing", { job_id: id, pids });
    void sweepStrays(id);
  }
  return { handbacks, marked };
}

/** What a restart found: the runs to hand back, and the processes that carry a job's marker. */
export interface Reconciled {
  handbacks: Handback[];
  marked: Map<string, number[]>;
}

/** A job found active after a restart, for the backend that placed it to take back. */
export interface Handback {
  row: Job;
  backend: Backend;
  found: Found;
  pendingStop: PendingStop | null;
  /** What the job's error adds if the backend finds nothing of the run (an unreadable placement.json). */
  note: string | null;
  /** Recorded again from its job directory: the database had lost it. */
  recordedAgain: boolean;
}

/** A run the restart cannot follow, with what the job's error adds to its reason. */
export type Ended = Gone & { note?: string | null };

// The run goes back to the backend recorded as placing it (one started by an older worker, which recorded none, or
// one whose record is unreadable, to the configured one); a job still preparing had nothing placed. A backend this
// program has none of can follow nothing: the job ends rather than stay active with nobody watching its run.
function handBack(
  deps: ReconcileDeps, row: Job, marked: number[],
): Omit<Handback, "pendingStop" | "recordedAgain"> | Ended {
  const dir = deps.dirs.of(row.id);
  const { chosen } = deps.backends;
  let placed: PlacementFile | null = null;
  let unreadable: string | null = null;
  try {
    placed = dir.readPlacement();
  } catch (err) {
    unreadable = (err as Error).message;
    deps.log.warn("a job's placement.json is unreadable; the configured backend judges it", {
      job_id: row.id, backend: chosen.kind, error: unreadable,
    });
  }
  if (placed === null && row.phase === "preparing") return { gone: "worker_restarted" };
  const backend = placed === null ? chosen : deps.backends.of(placed.backend);
  if (backend === null) {
    const why = `its placement.json names the backend ${JSON.stringify(placed!.backend)}, which this worker has ` +
      `none of (trainer.backend = "${chosen.kind}"): nothing could follow its run, so the restart ended it`;
    return { gone: "worker_restarted", why };
  }
  const state = placed?.state ?? null;
  const found = { id: row.id, train: row.request, dir, recorded: recordedPlacement(row), state, marked };
  const note = unreadable === null ? null : `${unreadable}, so the configured backend (${chosen.kind}) judged the run`;
  return { row, backend, found, note };
}

// What the record says of where the run lives, as its backend reads it.
function recordedPlacement(row: Job): RecordedPlacement {
  const identity = (pid: number | null, startTicks: number | null) =>
    pid === null ? null : { pid, startTicks, bootId: row.boot_id };
  return {
    shim: identity(row.shim_pid, row.shim_start_ticks),
    trainer: identity(row.pid, row.pid_start_ticks),
    schedulerId: row.slurm_job_id,
    bootId: row.boot_id,
  };
}

// A job the restart found with nothing running ends failed, and whatever of it runs on this host is stopped (a run
// whose backend cannot follow it may have some). One that never started a trainer keeps nothing: its
// dataset copy (a resume's links to its predecessor's) goes now, not with its directory at retention; one cut short
// while its dataset was copied held nothing but that half copy, and its whole directory goes.
export function endLeftover(
  deps: ReconcileDeps, job: Job, { gone: verdict, why, note }: Ended, marked: number[],
): void {
  const dir = deps.dirs.of(job.id);
  const again = job.resumed_from === null ? "send the request again" : `resume job ${job.resumed_from} again`;
  const usual = verdict === "host_rebooted"
    ? "the host rebooted while this job ran; its trainer is gone"
    : job.phase === "preparing"
    ? "the worker restarted while it copied this job's dataset, before any trainer was started; " +
      `nothing was trained: ${again}`
    : "the worker restarted while this job ran and its trainer was no longer running; " +
      "its exit status was not recorded";
  const said = why === undefined ? usual : `the worker restarted while this job ran; ${why}`;
  const error = note == null ? said : `${said} (${note})`;
  if (marked.length > 0) void sweepStrays(job.id);
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
    if (job.phase === "preparing") dir.removeNow();
    else dir.removeDataset();
  } catch (err) {
    const fields = { job_id: job.id, error: (err as Error).message };
    deps.log.error("could not remove the dataset copy of a job that never trained", fields);
  }
}

// A dispatch killed while it copied the dataset leaves a job directory that no record names, with no job.json
// and nothing running in it: removed before any request can start a new one. (A directory with a job.json is a
// job a lost database forgot: left for the operator.)
/** After the runs found are taken back or ended: what no run needs goes (directories no record names, TMPDIR links
 * of jobs no longer running). */
export function clearAfterRestart(deps: ReconcileDeps, marked: Map<string, number[]>): void {
  removeUnrecorded(deps, marked);
  removeTmpLinks(deps);
}

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

// A trainer's TMPDIR link outlives it when its shim was killed too (shim.ts removes it otherwise): at start-up, every
// link this state dir's jobs made (tmp-link.ts tells them from another worker's) goes unless its job is still active,
// its run adopted. A job that ended here, one retention pruned, one no record names: none has a trainer to need it.
function removeTmpLinks(deps: ReconcileDeps): void {
  const active = new Set(deps.store.activeJobs().map((job) => job.id));
  for (const id of jobsWithTmpLinks(deps.dirs.root)) {
    if (active.has(id)) continue;
    try {
      unlinkTmp(deps.dirs.of(id).dir);
      deps.log.info("removed the TMPDIR link of a job that is no longer running", { job_id: id });
    } catch (err) {
      deps.log.error("could not remove a job's TMPDIR link", { job_id: id, error: (err as Error).message });
    }
  }
}

// A job alive in a directory of this state dir with no record: recorded again as it began, if its job.json says how.
function recordAgain(deps: ReconcileDeps, id: string, dir: JobDir): Job | null {
  const file = dir.readJob();
  if (file === null || deps.store.get(id) !== null) return null;
  const inserted = deps.store.insertRecovered({
    id, request: file.request, requestHash: file.request_hash, idempotencyKey: file.idempotency_key,
    admissionWarning: file.admission_warning, simulated: file.simulated, now: file.created_at, phase: "loading",
    logPath: dir.log, totalSteps: null, dataset: null,
  });
  return inserted ? deps.store.get(id) : null;
}

function pendingStopOf(job: Job, now: () => Date): PendingStop | null {
  if (job.stop_reason === null) return null;
  const at = Date.parse(job.stop_requested_at ?? job.cancel_requested_at ?? "");
  return { reason: job.stop_reason, recordedAt: Number.isNaN(at) ? now().getTime() : at };
}
