import type { Checkpoint, Likeness, Sample, StopReason } from "../job.ts";
import { createTracker } from "../progress/tracker.ts";
import { rm } from "node:fs/promises";
import { runOutput, type followStates, type RunOutput } from "./checkpoints.ts";
import { followLikeness } from "./likeness.ts";
import { isKept } from "./kept-loras.ts";
import { findSamples } from "./samples.ts";
import type { followLog } from "./job-log.ts";
import { readOomKills } from "../os/proc.ts";
import { createWriteGuard } from "../store/write-guard.ts";
import type { startWatchdog } from "./watchdog.ts";
import type { Placement, Unrecorded } from "./placement.ts";
import type { RunContext } from "./run-context.ts";

// Progress reaches memory at once; the durable row is refreshed at most this often (and at the end).
const PERSIST_INTERVAL_MS = 1000;

/** One run's bookkeeping as it goes: what run.ts's steps and run-end.ts read and change. */
export interface RunState {
  readonly ctx: RunContext;
  readonly placement: Placement;
  readonly guard: ReturnType<typeof createWriteGuard>;
  readonly tracker: ReturnType<typeof createTracker>;
  readonly out: RunOutput;
  readonly oomKillsAtStart: number | null;
  checkpoints: Checkpoint[];
  /** The LoRAs of the preview points, kept past sd-scripts' removal (kept-loras.ts). */
  kept: Checkpoint[];
  /** A resumed run offers its predecessor's state until it has verified one of its own; then that state goes. */
  inherited: RunContext["inherited"];
  pausing: boolean;
  samples: Sample[];
  /** Scores each preview point as its samples come onto the record. */
  readonly likeness: ReturnType<typeof followLikeness>;
  statusRecorded: boolean;
  unrecorded: Unrecorded | null;
  /** The stop under way, if any: the end waits it out. */
  stopping: Promise<unknown>;
  stopReason: StopReason | null;
  forcedKill: boolean;
}

// What follows a run while it lives: its saved states, its silence and deadline, its output.
interface Followers {
  states: ReturnType<typeof followStates>;
  watchdog: ReturnType<typeof startWatchdog>;
  follower: ReturnType<typeof followLog>;
}

/** A run's state with what follows it. */
export type FollowedRun = RunState & Followers;

/** A run's state as it starts, from what it is told. */
export function openRun(ctx: RunContext, placement: Placement): RunState {
  const guard = createWriteGuard(ctx.log, ctx.id);
  const saveLikeness = (likeness: Likeness) => {
    guard("likeness", () => ctx.record.saveLikeness(likeness));
    ctx.changed();
  };
  const known = ctx.record.read()?.likeness ?? null;
  const state = { out: runOutput(ctx.runFile) };
  return {
    ctx,
    placement,
    guard,
    tracker: createTracker({
      expectedTotal: ctx.expectedTotal,
      resumedAt: ctx.resumedAt,
      nanUpdates: ctx.nanUpdates,
      persistEveryMs: PERSIST_INTERVAL_MS,
    }),
    out: state.out,
    oomKillsAtStart: readOomKills(ctx.memoryEvents),
    checkpoints: ctx.checkpoints,
    kept: ctx.checkpoints.filter((c) => isKept(state.out, c)),
    inherited: ctx.inherited,
    pausing: ctx.pauseRequested,
    samples: ctx.samples?.known ?? [],
    likeness: followLikeness({ plan: ctx.likeness, known, save: saveLikeness, log: ctx.log, jobId: ctx.id }),
    statusRecorded: false,
    unrecorded: null,
    stopping: Promise.resolve(),
    stopReason: null,
    forcedKill: false,
  };
}

/** The progress taken in so far onto the record (unsynced: the end writes it durably). */
export function persist(run: RunState): void {
  const progress = run.tracker.progress();
  const points = run.tracker.pendingLoss();
  run.tracker.persisted(run.guard("progress", () => run.ctx.record.saveProgressUnsynced(progress, points)));
}

/** The predecessor's state, once this run no longer needs it: off the record, then off the disk. */
export async function releaseInherited(run: RunState, by: string): Promise<void> {
  if (run.inherited === null) return;
  const { ctx } = run;
  const { state } = run.inherited;
  run.inherited = null;
  run.guard("released state", () => ctx.record.releaseState(state, by));
  await rm(state, { recursive: true, force: true }).catch((err: Error) => {
    ctx.log.error("could not remove a replaced saved state", { job_id: ctx.id, error: err.message });
  });
}

/** The samples the run wrote since the last look, onto the record, at each verified state and at the end.
 * sd-scripts draws a step's previews before it trains on, so every preview drawn before a state is whole when it is
 * verified. An output dir that cannot be listed now leaves the record as it is until the next look. The points up
 * to `whole` (the verified state's step; at the end, all) are scored. */
export async function recordSamples(run: RunState, whole = Infinity): Promise<void> {
  const { ctx } = run;
  if (ctx.samples === null) return;
  try {
    const found = await findSamples(run.out, ctx.samples.sinceMs, run.samples);
    run.likeness.seen(found.filter((s) => s.step <= whole));
    if (found.length === run.samples.length) return;
    run.samples = found;
    run.guard("samples", () => ctx.record.saveSamples(found));
  } catch (err) {
    ctx.log.error("could not list the run's samples", { job_id: ctx.id, error: (err as Error).message });
  }
}
