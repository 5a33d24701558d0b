import { failedOutcome, type Outcome } from "../job.ts";
import type { Progress } from "../progress/progress.ts";
import type { Job } from "../store/job-store.ts";
import { createWriteGuard, writeUntilDone } from "../store/write-guard.ts";
import type { LaunchFile } from "../job-dir/job-dir.ts";
import { adoptedOutputFile } from "./publish.ts";
import { clearAfterRestart, endLeftover, type Handback, reconcileOnStart } from "./reconcile.ts";
import { FRESH_MS, supervise } from "./run.ts";
import { placementRequest, runContext, type RunContext, type RunDeps } from "./run-context.ts";
import type { Backends } from "./backend.ts";
import type { Backend, Run, Unrecorded } from "./placement.ts";

/** What the supervisor is built from: what every run is given, and where runs are placed. */
export interface SupervisorDeps extends RunDeps {
  /** Where runs are placed, and where those found after a restart were. */
  backends: Backends;
}

/** What a job's preparation hands back: the launch to start (and where its LoRA is published), or how the job ended
 * before any trainer existed; null when its record was ended meanwhile and nothing is left to launch. */
export type Prepared = { launch: LaunchFile; outputFile: string } | { ended: Outcome } | null;

/** Why a job's preparation stopped: a cancel, not a failure of the copy. */
export class PreparationCancelled extends Error {
  constructor() {
    super("cancelled while the job was being prepared");
  }
}

/** A running job's progress, why a scheduler still holds it (null once it runs), and its outcome while that waits
 * for the state dir to take it. */
export type LiveProgress = Progress & { queue_reason: string | null; unrecorded: Unrecorded | null };

/** The runs of this worker: started, adopted after a restart, watched, cancelled, waited for. */
export interface Supervisor {
  /** The claimed job, from its first phase to its end: `work` prepares it (its dataset copied, its launch planned)
   * and hands back the launch, which the supervisor places through the configured backend and follows, or how the
   * job ended before any trainer existed, which goes on record. Watchers hear of its end. */
  prepare(id: string, work: (signal: AbortSignal) => Promise<Prepared>): void;
  /** Whether a run of ours follows the job, or is being launched for it. */
  follows(id: string): boolean;
  /** Answers once no process of the job is left, with the final record (null for a job the store does not know). */
  cancel(id: string): Promise<Job | null>;
  /** Answers once the run has ended (paused at its next state, or finished first), with the final record. */
  pause(id: string): Promise<Job | null>;
  /** Calls `watcher` after each change of the job; returns the unsubscribe. A watched run is read at the watched
   * pace from then on. */
  watch(id: string, watcher: () => void): () => void;
  isRunning(id: string): boolean;
  /** The one read of jobs as they stand: what every run's trainer wrote up to FRESH_MS ago is taken in (onto its
   * record) first, then `read` reads the records and, through `live`, each run's progress over them. */
  fresh<T>(read: (live: (id: string) => LiveProgress | null) => T): T;
  activeTrainerPid(): number | null;
  /** The runs that ended but whose record waits for the state dir. */
  unrecordedJobIds(): string[];
  /** Re-adopts what survived a restart of the worker (or the loss of its database); fails what did not. */
  reconcile(): void;
  /** Lets every job in preparation or running finish its bookkeeping (tests; a worker that stops leaves its runs
   * running and does not wait). */
  untilIdle(): Promise<void>;
}

// What the supervisor keeps: the runs it follows, the jobs being launched or prepared, who watches which job.
interface Supervision {
  deps: SupervisorDeps;
  runs: Map<string, Run>;
  launches: Set<string>;
  // Jobs in their first phase, `preparing`: no process of theirs exists yet. A cancel aborts the work.
  preparations: Map<string, { abort: AbortController; done: Promise<void> }>;
  watchers: Map<string, Set<() => void>>;
  lives: WeakMap<Run, { progress: Progress; live: LiveProgress }>;
}

/** The supervisor of this worker's runs. */
export function createSupervisor(deps: SupervisorDeps): Supervisor {
  const s: Supervision = {
    deps, runs: new Map(), launches: new Set(), preparations: new Map(), watchers: new Map(), lives: new WeakMap(),
  };
  return {
    prepare: (id, work) => prepare(s, id, work),
    follows: (id) => s.runs.has(id) || s.launches.has(id),
    cancel: (id) => cancel(s, id),
    pause: (id) => pause(s, id),
    watch: (id, watcher) => watch(s, id, watcher),
    isRunning: (id) => s.runs.has(id),
    fresh(read) {
      for (const run of s.runs.values()) run.refresh(FRESH_MS);
      return read((id) => liveOf(s, id));
    },
    activeTrainerPid: () => s.runs.values().next().value?.pgid() ?? null,
    unrecordedJobIds: () => [...s.runs.values()].filter((r) => r.unrecorded() !== null).map((r) => r.id),
    reconcile: () => reconcile(s),
    async untilIdle() {
      await Promise.all([...s.preparations.values()].map((p) => p.done));
      await Promise.all([...s.runs.values()].map((r) => r.finished));
    },
  };
}

function notify(s: Supervision, id: string): void {
  for (const watcher of s.watchers.get(id) ?? []) watcher();
}

// A run's progress as last taken in; a run Slurm still holds shows as queued, with Slurm's reason. The same object
// until the run's progress or its place in a queue changes: answers built from it are serialised once per change.
function liveOf(s: Supervision, id: string): LiveProgress | null {
  const run = s.runs.get(id);
  if (!run) return null;
  const [progress, reason, unrecorded] = [run.progress(), run.queued(), run.unrecorded()];
  const last = s.lives.get(run);
  const same = last?.progress === progress && last.live.queue_reason === reason;
  if (same && last.live.unrecorded === unrecorded) return last.live;
  const live: LiveProgress = reason === null
    ? { ...progress, queue_reason: null, unrecorded }
    : { ...progress, phase: "queued", queue_reason: reason, unrecorded };
  s.lives.set(run, { progress, live });
  return live;
}

function track(s: Supervision, run: Run): void {
  s.runs.set(run.id, run);
  void run.finished.finally(() => s.runs.delete(run.id));
}

// What a run is told, with the supervisor's own hooks: who hears of its changes, and whether anyone watches.
function contextOf(s: Supervision, row: Job, outputFile: string, backend: Backend): RunContext {
  const hooks = { changed: () => notify(s, row.id), watched: () => s.watchers.has(row.id) };
  return runContext(s.deps, row, outputFile, backend, hooks);
}

// A failure or cancel of the preparation, or a launch that cannot start, is recorded as the job's end; watchers hear
// of the end either way.
function prepare(s: Supervision, id: string, work: (signal: AbortSignal) => Promise<Prepared>): void {
  const abort = new AbortController();
  const done = work(abort.signal)
    .then((prepared) => (prepared !== null && "launch" in prepared ? launch(s, id, prepared) : prepared?.ended ?? null))
    .catch((err: Error) => failedOutcome("spawn_failed", `the job could not be prepared: ${err.message}`))
    .then(async (ended) => {
      if (ended === null) return;
      const { store, now, log } = s.deps;
      const record = () => store.record(id).finish(ended, now().toISOString());
      await writeUntilDone(createWriteGuard(log, id), "end before the launch", record);
    })
    .finally(() => {
      s.preparations.delete(id);
      notify(s, id);
    });
  s.preparations.set(id, { abort, done });
}

// A prepared job's run, placed and followed; one that cannot start ends spawn_failed, its directory gone whole, as
// a job that ended in its preparation.
async function launch(s: Supervision, id: string, { launch, outputFile }: { launch: LaunchFile; outputFile: string }) {
  const { store, dirs, log } = s.deps;
  const row = store.get(id);
  if (row === null) return null;
  try {
    await start(s, row, outputFile, launch);
  } catch (err) {
    const error = `the trainer could not be started: ${(err as Error).message}`;
    log.error("spawn failed", { job_id: id, error });
    await dirs.of(id).remove();
    return failedOutcome("spawn_failed", error);
  }
  const { tier, device_index } = row.request;
  const resumed = row.resumed_from === null ? {} : { resumed_from: row.resumed_from, resume_step: row.resume_step };
  log.info("job started", { job_id: id, tier, device_index, simulated: row.simulated, ...resumed });
  return null;
}

// The job's files and who places it come first, so a restart at any moment finds both; the backend's own state of
// the placed run follows, for the restart that hands the run back to it.
async function start(s: Supervision, row: Job, outputFile: string, launch: LaunchFile): Promise<void> {
  s.launches.add(row.id);
  try {
    const job = {
      id: row.id, request: row.request, request_hash: row.request_hash, idempotency_key: row.idempotency_key,
      admission_warning: row.admission_warning, simulated: row.simulated, created_at: row.created_at,
    };
    const { chosen } = s.deps.backends;
    const ctx = contextOf(s, row, outputFile, chosen);
    ctx.jobDir.writeLaunch(launch, job);
    ctx.jobDir.writePlacement({ backend: chosen.kind, state: null });
    const { placement, state } = await chosen.start(placementRequest(ctx, row));
    track(s, supervise(ctx, placement, null));
    recordPlacement(s, ctx, chosen.kind, state);
  } finally {
    s.launches.delete(row.id);
  }
}

function recordPlacement(s: Supervision, ctx: RunContext, backend: string, state: unknown): void {
  try {
    ctx.jobDir.writePlacement({ backend, state });
  } catch (err) {
    s.deps.log.error("could not record where the run was placed", { job_id: ctx.id, error: (err as Error).message });
  }
}

// A cancel or pause that arrives while its job is being prepared or launched waits for the run (or the job's end).
async function launching(s: Supervision, id: string): Promise<Run | undefined> {
  await s.preparations.get(id)?.done;
  while (s.launches.has(id) && !s.runs.has(id)) await Bun.sleep(5);
  return s.runs.get(id);
}

// A job still preparing stops there: its intent is recorded first, so a copy that ends at the same moment launches
// nothing.
async function cancel(s: Supervision, id: string): Promise<Job | null> {
  const { store, now } = s.deps;
  if (!store.get(id)) return null;
  const preparing = s.preparations.get(id);
  if (preparing) {
    store.record(id).requestStop("cancel", now().toISOString());
    preparing.abort.abort(new PreparationCancelled());
  }
  const run = s.runs.get(id) ?? (await launching(s, id));
  if (run) {
    await run.stop("cancel");
    await run.finished;
  }
  return store.get(id);
}

// A job still preparing has the pause on record before its launch, so its run is paused from its first step.
async function pause(s: Supervision, id: string): Promise<Job | null> {
  const { store, now } = s.deps;
  if (!store.get(id)) return null;
  if (s.preparations.has(id)) store.record(id).requestPause(now().toISOString());
  const run = s.runs.get(id) ?? (await launching(s, id));
  if (run) {
    run.pause();
    await run.finished;
  }
  return store.get(id);
}

function watch(s: Supervision, id: string, watcher: () => void): () => void {
  const set = s.watchers.get(id) ?? new Set();
  s.watchers.set(id, set.add(watcher));
  s.runs.get(id)?.refresh(0);
  return () => {
    set.delete(watcher);
    if (set.size === 0) s.watchers.delete(id);
  };
}

// Each run a restart found goes back to its backend, told as a launch is told; what it finds is followed, a run it
// finds nothing of ends; then what no run needs is cleared.
function reconcile(s: Supervision): void {
  const { store, dirs, backends, now, log } = s.deps;
  const deps = { store, dirs, backends, now, log };
  const { handbacks, marked } = reconcileOnStart(deps);
  for (const handback of handbacks) takeBack(s, handback);
  clearAfterRestart(deps, marked);
}

function takeBack(s: Supervision, { row, backend, found, pendingStop, note, recordedAgain }: Handback): void {
  const { config, log } = s.deps;
  try {
    const ctx = contextOf(s, row, adoptedOutputFile(row.request, config.handoff_root), backend);
    const recovery = backend.recover(found, placementRequest(ctx, row));
    if ("gone" in recovery) return endLeftover(s.deps, row, { ...recovery, note }, found.marked);
    if (recordedAgain) {
      log.warn("re-adopting a running job the job database did not know", { job_id: row.id, pids: found.marked });
    }
    log.info("re-adopting job after restart", { job_id: row.id, backend: backend.kind, ...recovery.detail });
    track(s, supervise(ctx, recovery.placement, pendingStop));
  } catch (err) {
    log.error("could not re-adopt a running job", { job_id: row.id, error: (err as Error).message });
  }
}
