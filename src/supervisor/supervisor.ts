import { existsSync } from "node:fs";
import { basename, join } from "node:path";
import type { Config } from "../config/schema.ts";
import { failedOutcome, type Outcome } from "../job.ts";
import type { Logger } from "../logger.ts";
import type { Progress } from "../progress/progress.ts";
import type { Job, JobStore } from "../store/job-store.ts";
import { createWriteGuard, writeUntilDone } from "../store/write-guard.ts";
import type { JobDirs, LaunchFile } from "../job-dir/job-dir.ts";
import { isStrictlyInside } from "../request/contained-path.ts";
import { adoptedOutputFile } from "./publish.ts";
import { reconcileOnStart } from "./reconcile.ts";
import { FRESH_MS, supervise } from "./run.ts";
import type { Backends } from "./backend.ts";
import type { Backend, Run, RunContext, Unrecorded } from "./placement.ts";
import { TIERS } from "../tiers.ts";

export interface SupervisorDeps {
  store: JobStore;
  config: Config;
  /** Where runs are placed, and where those found after a restart were. */
  backends: Backends;
  dirs: JobDirs;
  now: () => Date;
  log: Logger;
  /** Where the kernel counts OOM kills of the trainer's cgroup (cgroup v2 or v1's memory controller), if anywhere. */
  memoryEvents?: string | null;
}

export type Supervisor = ReturnType<typeof createSupervisor>;

/** Why a job's preparation stopped: a cancel, not a failure of the copy. */
export class PreparationCancelled extends Error {
  constructor() {
    super("cancelled while the job was being prepared");
  }
}

/** A running job's progress, why a scheduler still holds it (null once it runs), and its outcome while that waits
 * for the state dir to take it. */
export type LiveProgress = Progress & { queue_reason: string | null; unrecorded: Unrecorded | null };

// The runs of this worker: started, adopted after a restart, watched, cancelled, waited for.
export function createSupervisor(deps: SupervisorDeps) {
  const { store, config, now, log } = deps;
  const runs = new Map<string, Run>();
  const launches = new Set<string>();
  // Jobs in their first phase, `preparing`: no process of theirs exists yet. A cancel aborts the work.
  const preparations = new Map<string, { abort: AbortController; done: Promise<void> }>();
  const watchers = new Map<string, Set<() => void>>();
  const lives = new WeakMap<Run, { progress: Progress; live: LiveProgress }>();
  const notify = (id: string) => {
    for (const watcher of watchers.get(id) ?? []) watcher();
  };

  // A run's progress as last taken in; a run Slurm still holds shows as queued, with Slurm's reason. The same object
  // until the run's progress or its place in a queue changes: answers built from it are serialised once per change.
  const liveOf = (id: string): LiveProgress | null => {
    const run = runs.get(id);
    if (!run) return null;
    const [progress, reason, unrecorded] = [run.progress(), run.queued(), run.unrecorded()];
    const last = lives.get(run);
    const same = last?.progress === progress && last.live.queue_reason === reason;
    if (same && last.live.unrecorded === unrecorded) return last.live;
    const live: LiveProgress = reason === null
      ? { ...progress, queue_reason: null, unrecorded }
      : { ...progress, phase: "queued", queue_reason: reason, unrecorded };
    lives.set(run, { progress, live });
    return live;
  };

  const contextFor = (row: Job, outputFile: string, backend: Backend): RunContext => {
    const { request } = row;
    const dir = deps.dirs.of(row.id);
    const startedAt = Date.parse(row.started_at ?? row.created_at);
    const boundMs = config.watchdog.tier_timeout_seconds[TIERS[request.tier].budget] * 1000;
    // A run launched before run directories existed writes its LoRA straight into the output dir.
    const runFile = existsSync(dir.run) ? join(dir.run, basename(outputFile)) : outputFile;
    return {
      id: row.id, jobDir: dir, stateDir: config.state_dir, runFile, outputFile, handoffRoot: config.handoff_root,
      store, now, log,
      graceMs: config.trainer.cancel_grace_seconds * 1000,
      stallMs: config.watchdog.stall_seconds * 1000,
      deadline: backend.deadline(startedAt, boundMs),
      nanUpdates: config.watchdog.nan_updates,
      expectedTotal: row.total_steps,
      resumedAt: row.resumed_from_step ?? 0,
      checkpoints: row.checkpoints,
      inherited: row.resume_state === null || row.resume_step === null || isStrictlyInside(dir.run, row.resume_state)
        ? null
        : { step: row.resume_step, state: row.resume_state, digest: row.resume_digest },
      pauseRequested: row.pause_requested_at !== null,
      samples: (request.samples ?? 0) > 0 ? { known: row.samples, sinceMs: Date.parse(row.created_at) } : null,
      memoryEvents: deps.memoryEvents ?? null,
      changed: () => notify(row.id),
      watched: () => watchers.has(row.id),
    };
  };
  const track = (run: Run) => {
    runs.set(run.id, run);
    void run.finished.finally(() => runs.delete(run.id));
  };
  // A cancel that arrives while its job is being prepared or launched waits for the run (or the job's end).
  const launching = async (id: string): Promise<Run | undefined> => {
    await preparations.get(id)?.done;
    while (launches.has(id) && !runs.has(id)) await Bun.sleep(5);
    return runs.get(id);
  };
  // The backend's own state of a placed run, for the restart that hands the run back to it.
  const recordPlacement = (ctx: RunContext, backend: Backend, state: unknown) => {
    try {
      ctx.jobDir.writePlacement({ backend: backend.kind, state });
    } catch (err) {
      log.error("could not record where the run was placed", { job_id: ctx.id, error: (err as Error).message });
    }
  };
  const record = async (id: string, what: string, outcome: Outcome) => {
    const guard = createWriteGuard(log, id);
    await writeUntilDone(guard, what, () => store.finish(id, outcome, now().toISOString()));
  };

  return {
    // The claimed job's first phase: `work` copies its dataset and launches it, or says how it ended before any
    // trainer existed (a copy that failed or was cancelled), which goes on record. Watchers hear of its end.
    prepare(id: string, work: (signal: AbortSignal) => Promise<Outcome | null>): void {
      const abort = new AbortController();
      const done = work(abort.signal)
        .catch((err: Error) => failedOutcome("spawn_failed", `the job could not be prepared: ${err.message}`))
        .then(async (ended) => {
          if (ended !== null) await record(id, "end before the launch", ended);
        })
        .finally(() => {
          preparations.delete(id);
          notify(id);
        });
      preparations.set(id, { abort, done });
    },

    // Places a claimed job's run through the configured backend and follows it; throws (having stopped whatever it
    // started) when it cannot. The job's files and who places it come first, so a restart at any moment finds both.
    async start(row: Job, outputFile: string, launch: LaunchFile): Promise<void> {
      launches.add(row.id);
      try {
        const { request } = row;
        const job = {
          id: row.id, request, request_hash: row.request_hash, idempotency_key: row.idempotency_key,
          admission_warning: row.admission_warning, simulated: row.simulated, created_at: row.created_at,
        };
        const { chosen } = deps.backends;
        const ctx = contextFor(row, outputFile, chosen);
        ctx.jobDir.writeLaunch(launch, job);
        ctx.jobDir.writePlacement({ backend: chosen.kind, state: null });
        const { placement, state } = await chosen.start(ctx, request);
        track(supervise(ctx, placement, null));
        recordPlacement(ctx, chosen, state);
      } finally {
        launches.delete(row.id);
      }
    },

    // Whether a run of ours follows the job, or is being launched for it.
    follows(id: string): boolean {
      return runs.has(id) || launches.has(id);
    },

    // Answers once no process of the job is left, with the final record. A job still preparing stops there:
    // its intent is recorded first, so a copy that ends at the same moment launches nothing.
    async cancel(id: string): Promise<Job | null> {
      const row = store.get(id);
      if (!row) return null;
      const preparing = preparations.get(id);
      if (preparing) {
        store.requestStop(id, "cancel", now().toISOString());
        preparing.abort.abort(new PreparationCancelled());
      }
      const run = runs.get(id) ?? (await launching(id));
      if (!run) return store.get(id);
      await run.stop("cancel");
      await run.finished;
      return store.get(id);
    },

    // Answers once the run has ended (paused at its next state, or finished first), with the final record. A job
    // still preparing has the pause on record before its launch, so its run is paused from its first step.
    async pause(id: string): Promise<Job | null> {
      const row = store.get(id);
      if (!row) return null;
      if (preparations.has(id)) store.requestPause(id, now().toISOString());
      const run = runs.get(id) ?? (await launching(id));
      if (!run) return store.get(id);
      run.pause();
      await run.finished;
      return store.get(id);
    },

    // Calls `watcher` after each change of the job; returns the unsubscribe. A watched run is read at the
    // watched pace from now on.
    watch(id: string, watcher: () => void): () => void {
      const set = watchers.get(id) ?? new Set();
      watchers.set(id, set.add(watcher));
      runs.get(id)?.refresh(0);
      return () => {
        set.delete(watcher);
        if (set.size === 0) watchers.delete(id);
      };
    },

    isRunning(id: string): boolean {
      return runs.has(id);
    },

    /** The one read of jobs as they stand: what every run's trainer wrote up to FRESH_MS ago is taken in (onto its
     * record) first, then `read` reads the records and, through `live`, each run's progress over them. */
    fresh<T>(read: (live: (id: string) => LiveProgress | null) => T): T {
      for (const run of runs.values()) run.refresh(FRESH_MS);
      return read(liveOf);
    },

    activeTrainerPid(): number | null {
      const [run] = runs.values();
      return run?.pgid() ?? null;
    },

    /** The runs that ended but whose record waits for the state dir. */
    unrecordedJobIds(): string[] {
      return [...runs.values()].filter((r) => r.unrecorded() !== null).map((r) => r.id);
    },

    // Re-adopts what survived a restart of the worker (or the loss of its database); fails what did not.
    reconcile(): void {
      reconcileOnStart({ store, dirs: deps.dirs, backends: deps.backends, now, log }, (adoption) => {
        const { row, backend } = adoption;
        const outputFile = adoptedOutputFile(row.request, config.handoff_root);
        try {
          const ctx = contextFor(row, outputFile, backend);
          track(supervise(ctx, adoption.placement(ctx), adoption.pendingStop));
        } catch (err) {
          log.error("could not re-adopt a running job", { job_id: row.id, error: (err as Error).message });
        }
      });
    },

    // Lets every job in preparation or running finish its bookkeeping (tests; a worker that stops leaves its runs
    // running and does not wait).
    async untilIdle(): Promise<void> {
      await Promise.all([...preparations.values()].map((p) => p.done));
      await Promise.all([...runs.values()].map((r) => r.finished));
    },
  };
}
