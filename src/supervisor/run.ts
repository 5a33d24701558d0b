import type { Checkpoint, ResumePoint, StopReason } from "../job.ts";
import { followStates, stateDir, stillThere } from "./checkpoints.ts";
import { followLog } from "./job-log.ts";
import { untilDone } from "../os/terminate.ts";
import { startWatchdog } from "./watchdog.ts";
import { endRun } from "./run-end.ts";
import { keepLora, withKept } from "./kept-loras.ts";
import { openRun, persist, recordSamples, releaseInherited, type FollowedRun, type RunState } from "./run-state.ts";
import type { PendingStop, Placement, Run } from "./placement.ts";
import type { RunContext } from "./run-context.ts";

// How often the trainer's output is read. An answer about the job (GET /train/{id}, the list, /metrics) reads
// first, unless the last read is younger than FRESH_MS; an event stream's job is read every WATCHED_TICK_MS, so
// each step reaches the stream within that; a job nobody looks at is read every UNWATCHED_TICK_MS, which is what
// keeps its record, its saved states and its watchdog current. So a poller sees progress at most FRESH_MS old,
// and the worker does not wake ten times a second for a job nobody is looking at.
export const FRESH_MS = 50;
export const WATCHED_TICK_MS = 100;
const UNWATCHED_TICK_MS = 5000;

/** One run's bookkeeping, wherever its processes live (the placement: this host, or a Slurm job). */
export function supervise(ctx: RunContext, placement: Placement, pending: PendingStop | null): Run {
  const run = follow(openRun(ctx, placement));
  // A stop recorded by a worker that has since restarted: sent again, with what is left of its grace.
  if (pending) {
    run.stopReason = pending.reason;
    void stop(run, pending.reason, Math.max(0, ctx.graceMs - (ctx.now().getTime() - pending.recordedAt)));
  }
  const finished = placement.exit.then((ended) => endRun(run, ended)).catch((err: Error) => {
    ctx.log.error("supervision of the job ended in error", { job_id: ctx.id, error: err.message, stack: err.stack });
  });
  return {
    id: ctx.id,
    pgid: placement.pgid,
    queued: placement.queued,
    progress: () => run.tracker.progress(),
    unrecorded: () => run.unrecorded,
    refresh(maxAgeMs) {
      if (run.follower.sinceRead() >= maxAgeMs) run.follower.drain();
    },
    stop: (reason) => stop(run, reason),
    pause: () => pause(run),
    finished,
  };
}

// The followers call back into the run they follow; each starts looking only after this returns, and what one may
// ask while it is made (how soon to look) is read from the state.
function follow(state: RunState): FollowedRun {
  const { ctx } = state;
  const run: FollowedRun = Object.assign(state, {
    states: followStates({
      out: state.out, log: ctx.log, jobId: ctx.id, totalSteps: ctx.expectedTotal,
      saved: (step, checkpoint, digest) => stateSaved(run, step, checkpoint, digest),
    }),
    watchdog: startWatchdog(
      { stallMs: ctx.stallMs, deadline: ctx.deadline },
      (reason) => void stop(run, reason),
      () => state.placement.queued() !== null,
      () => run.follower.drain(),
    ),
    follower: followLog(ctx.jobDir.log, (text) => {
      try {
        takeIn(run, text);
      } catch (err) {
        ctx.log.error("could not take in trainer output", { job_id: ctx.id, error: (err as Error).message });
      }
    }, () => (ctx.watched() || state.pausing ? WATCHED_TICK_MS : UNWATCHED_TICK_MS)),
  });
  return run;
}

// What the trainer printed: progress, a NaN streak, a state being saved; the first words mark the job training.
function takeIn(run: FollowedRun, text: string): void {
  const { ctx, tracker } = run;
  run.watchdog.touch();
  const firstWords = !run.statusRecorded;
  if (firstWords) run.statusRecorded = run.guard("status", () => ctx.record.markTraining());
  const update = tracker.push(text);
  if (update.contradiction !== null) {
    const expected = tracker.progress().expected_total;
    ctx.log.warn(
      "the trainer printed a step total that contradicts the run's; kept in the log, not taken as progress",
      { job_id: ctx.id, printed: update.contradiction, expected },
    );
  }
  if (update.nanTripped) void stop(run, "nan_loss");
  if (update.savingState !== null) {
    run.states.announced(update.savingState);
    if (ctx.previewSteps.includes(update.savingState)) void keepPoint(run, update.savingState);
  }
  if (update.persistDue) persist(run);
  if (update.changed || firstWords) ctx.changed();
}

// A verified state is offered at once; a pause waits for exactly this moment.
function stateSaved(run: FollowedRun, step: number, checkpoint: Checkpoint | null, digest: string): void {
  const { ctx } = run;
  const others = stillThere(run.checkpoints).filter((c) => c.step !== step);
  run.checkpoints = checkpoint ? [...others, checkpoint] : others;
  const checkpoints = withKept(run.checkpoints, run.kept);
  const point: ResumePoint = { step, state: stateDir(run.out, step), digest, checkpoints, gone: null };
  if (run.guard("resume point", () => ctx.record.saveResumePoint(point))) {
    void releaseInherited(run, `replaced by job ${ctx.id}'s newer state at step ${step}`);
  }
  ctx.log.info("state saved", { job_id: ctx.id, step, pausing: run.pausing });
  if (run.pausing) void stop(run, "pause");
  void recordSamples(run, step).finally(ctx.changed);
}

// A preview point's LoRA, linked before sd-scripts removes it at its next save.
async function keepPoint(run: RunState, step: number): Promise<void> {
  try {
    const kept = await keepLora(run.out, step);
    if (kept !== null) run.kept = withKept(run.kept, [kept]);
  } catch (err) {
    const error = (err as Error).message;
    run.ctx.log.error("could not keep a preview point's LoRA", { job_id: run.ctx.id, step, error });
  }
}

// Why is recorded before the first signal, so the exit reads as that and not as a crash. The reason is kept in
// memory too: a state dir that cannot take the write does not stop the stop.
function stop(run: RunState, reason: StopReason, graceMs = run.ctx.graceMs): Promise<void> {
  const { ctx } = run;
  run.stopReason ??= reason;
  run.guard("stop reason", () => ctx.record.requestStop(reason, ctx.now().toISOString()));
  ctx.log.info("stopping job", { job_id: ctx.id, reason });
  run.stopping = run.stopping.then(() => kill(run, graceMs));
  return run.stopping.then(() => undefined);
}

async function kill(run: RunState, graceMs: number): Promise<void> {
  const forced = await untilDone(
    () => run.placement.stop(graceMs),
    (err) => run.ctx.log.error("could not yet stop the job; retrying", { job_id: run.ctx.id, error: err.message }),
  );
  run.forcedKill ||= forced;
}

// A pausing run is read at the watched pace, so it stops at the state it saves next, not one a slow read finds.
function pause(run: FollowedRun): void {
  const { ctx } = run;
  run.pausing = true;
  run.guard("pause", () => ctx.record.requestPause(ctx.now().toISOString()));
  ctx.log.info("pausing job at its next saved state", { job_id: ctx.id });
  run.follower.drain();
}
