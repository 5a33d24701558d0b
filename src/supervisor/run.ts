import type { Outcome, StopReason } from "../job.ts";
import { createTracker } from "../progress/tracker.ts";
import { verifySafetensors } from "../safetensors/verify.ts";
import { rm } from "node:fs/promises";
import type { ResumePoint } from "../job.ts";
import { followStates, runOutput, closingResumePoint, stateDir, stillThere } from "./checkpoints.ts";
import { findSamples } from "./samples.ts";
import { tailLines } from "../job-dir/log-tail.ts";
import type { ExitWatch } from "./exit-watch.ts";
import { followLog } from "./job-log.ts";
import { decideOutcome } from "./outcome.ts";
import { publishLora } from "./publish.ts";
import { readOomKills } from "../os/proc.ts";
import { untilDone } from "../os/terminate.ts";
import { stateDirFull } from "../store/state-health.ts";
import { createWriteGuard, writeUntilDone } from "../store/write-guard.ts";
import { startWatchdog } from "./watchdog.ts";
import type { PendingStop, Placement, Run, RunContext, Unrecorded } from "./placement.ts";

// Progress reaches memory at once; the durable row is refreshed at most this often (and at the end).
const PERSIST_INTERVAL_MS = 1000;
const LOG_LINES_FOR_OUTCOME = 200;
// How often the trainer's output is read. An answer about the job (GET /train/{id}, the list, /metrics) reads
// first, unless the last read is younger than FRESH_MS; an event stream's job is read every WATCHED_TICK_MS, so
// each step reaches the stream within that; a job nobody looks at is read every UNWATCHED_TICK_MS, which is what
// keeps its record, its saved states and its watchdog current. So a poller sees progress at most FRESH_MS old,
// and the worker does not wake ten times a second for a job nobody is looking at.
export const FRESH_MS = 50;
export const WATCHED_TICK_MS = 100;
const UNWATCHED_TICK_MS = 5000;

// One run's bookkeeping, wherever its processes live (the placement: this host, or a Slurm job).
export function supervise(ctx: RunContext, placement: Placement, pending: PendingStop | null): Run {
  const guard = createWriteGuard(ctx.log, ctx.id);
  const oomKillsAtStart = readOomKills(ctx.memoryEvents);
  const tracker = createTracker({
    expectedTotal: ctx.expectedTotal,
    resumedAt: ctx.resumedAt,
    nanUpdates: ctx.nanUpdates,
    persistEveryMs: PERSIST_INTERVAL_MS,
  });
  const out = runOutput(ctx.runFile);
  let checkpoints = ctx.checkpoints;
  // A resumed run offers its predecessor's state until it has verified one of its own; then that state goes.
  let inherited = ctx.inherited;
  const release = async (by: string) => {
    if (inherited === null) return;
    const { state } = inherited;
    inherited = null;
    guard("released state", () => ctx.store.releaseState(state, ctx.id, by));
    await rm(state, { recursive: true, force: true }).catch((err: Error) => {
      ctx.log.error("could not remove a replaced saved state", { job_id: ctx.id, error: err.message });
    });
  };
  let pausing = ctx.pauseRequested;
  let samples = ctx.samples?.known ?? [];
  // sd-scripts samples just before it saves a checkpoint, so a verified state means its samples are whole too.
  // An output dir that cannot be listed now leaves the record as it is until the next look.
  const recordSamples = async () => {
    if (ctx.samples === null) return;
    try {
      const found = await findSamples(out, ctx.samples.sinceMs, samples);
      if (found.length === samples.length) return;
      samples = found;
      guard("samples", () => ctx.store.saveSamples(ctx.id, samples));
    } catch (err) {
      ctx.log.error("could not list the run's samples", { job_id: ctx.id, error: (err as Error).message });
    }
  };
  let statusRecorded = false;
  let unrecorded: Unrecorded | null = null;
  let stopping: Promise<unknown> = Promise.resolve();
  let stopReason: StopReason | null = null;
  let forcedKill = false;

  const persist = () => {
    const progress = tracker.progress();
    const points = tracker.pendingLoss();
    tracker.persisted(guard("progress", () => ctx.store.saveProgressUnsynced(ctx.id, progress, points)));
  };
  const kill = async (graceMs: number) => {
    const forced = await untilDone(
      () => placement.stop(graceMs),
      (err) => ctx.log.error("could not yet stop the job; retrying", { job_id: ctx.id, error: err.message }),
    );
    forcedKill ||= forced;
  };
  // Why is recorded before the first signal, so the exit reads as that and not as a crash. The reason is
  // kept in memory too: a state dir that cannot take the write does not stop the stop.
  const stop = (reason: StopReason, graceMs = ctx.graceMs) => {
    stopReason ??= reason;
    guard("stop reason", () => ctx.store.requestStop(ctx.id, reason, ctx.now().toISOString()));
    ctx.log.info("stopping job", { job_id: ctx.id, reason });
    stopping = stopping.then(() => kill(graceMs));
    return stopping.then(() => undefined);
  };
  // A verified state is offered at once; a pause waits for exactly this moment.
  const states = followStates({
    out, log: ctx.log, jobId: ctx.id, totalSteps: ctx.expectedTotal,
    saved: (step, checkpoint, digest) => {
      checkpoints = [...stillThere(checkpoints).filter((c) => c.step !== step), ...(checkpoint ? [checkpoint] : [])];
      const point: ResumePoint = { step, state: stateDir(out, step), digest, checkpoints, gone: null };
      if (guard("resume point", () => ctx.store.saveResumePoint(ctx.id, point))) {
        void release(`replaced by job ${ctx.id}'s newer state at step ${step}`);
      }
      ctx.log.info("state saved", { job_id: ctx.id, step, pausing });
      if (pausing) void stop("pause");
      void recordSamples().finally(ctx.changed);
    },
  });
  const watchdog = startWatchdog(
    { stallMs: ctx.stallMs, deadline: ctx.deadline },
    (reason) => void stop(reason),
    () => placement.queued() !== null,
    () => follower.drain(),
  );
  const onText = (text: string) => {
    watchdog.touch();
    const firstWords = !statusRecorded;
    if (firstWords) statusRecorded = guard("status", () => ctx.store.markTraining(ctx.id));
    const update = tracker.push(text);
    if (update.contradiction !== null) {
      const expected = tracker.progress().expected_total;
      ctx.log.warn(
        "the trainer printed a step total that contradicts the run's; kept in the log, not taken as progress",
        { job_id: ctx.id, printed: update.contradiction, expected },
      );
    }
    if (update.nanTripped) void stop("nan_loss");
    if (update.savingState !== null) states.announced(update.savingState);
    if (update.persistDue) persist();
    if (update.changed || firstWords) ctx.changed();
  };
  const follower = followLog(ctx.jobDir.log, (text) => {
    try {
      onText(text);
    } catch (err) {
      ctx.log.error("could not take in trainer output", { job_id: ctx.id, error: (err as Error).message });
    }
  }, () => (ctx.watched() || pausing ? WATCHED_TICK_MS : UNWATCHED_TICK_MS));
  // A stop recorded by a worker that has since restarted: sent again, with what is left of its grace.
  if (pending) {
    stopReason = pending.reason;
    void stop(pending.reason, Math.max(0, ctx.graceMs - (ctx.now().getTime() - pending.recordedAt)));
  }

  const end = async (ended: ExitWatch) => {
    watchdog.stop();
    states.stop();
    // The leader's exit is not the tree's: wait out a kill in progress, then clear what is left.
    await stopping;
    const forced = await untilDone(
      () => placement.clear(ctx.graceMs),
      (err) => {
        ctx.log.error("could not yet sweep the job's leftovers; retrying", { job_id: ctx.id, error: err.message });
      },
    );
    forcedKill ||= forced;
    await follower.stop();
    try {
      ctx.jobDir.repairLogCuts();
    } catch (err) {
      ctx.log.error("could not repair the log's cut record", { job_id: ctx.id, error: (err as Error).message });
    }
    tracker.flush();
    persist();
    const decided = decideOutcome({
      ended,
      stopReason: stopReason ?? ctx.store.get(ctx.id)?.stop_reason ?? null,
      forcedKill,
      lastLossNan: tracker.progress().last_loss_nan,
      verdict: await verifySafetensors(ctx.runFile),
      outputFile: ctx.outputFile,
      logTail: tailLines(ctx.jobDir.log, LOG_LINES_FOR_OUTCOME),
      oomKills: oomKillsAtStart === null
        ? null
        : (readOomKills(ctx.memoryEvents) ?? oomKillsAtStart) - oomKillsAtStart,
      phase: tracker.progress().phase,
      stateFull: stateDirFull(ctx.stateDir),
    });
    const outcome = decided.status === "succeeded" ? await publish(decided) : decided;
    const point = await closeResumePoint(outcome.status === "succeeded");
    await recordSamples();
    const endedAt = ctx.now().toISOString();
    const record = () => {
      if (point !== null) ctx.store.saveResumePoint(ctx.id, point);
      ctx.store.saveProgress(ctx.id, tracker.progress());
      ctx.store.appendLoss(ctx.id, tracker.pendingLoss());
      ctx.store.finish(ctx.id, outcome, endedAt);
    };
    // The outcome is known: while the state dir cannot take it, it is answered from memory, marked so.
    await writeUntilDone(guard, "final record", record, () => {
      unrecorded = { outcome, ended_at: endedAt };
      ctx.changed();
    });
    if ("spawn_error" in ended) removeCopy();
    ctx.changed();
    ctx.log[outcome.status === "failed" ? "warn" : "info"]("job ended", {
      job_id: ctx.id,
      status: outcome.status,
      error_code: outcome.error_code,
      exit_code: outcome.exit_code,
      signal: outcome.signal,
    });
  };
  // The verified LoRA goes into arbo's output_dir; until it is there the job has not succeeded. The run directory
  // keeps its copy, so a publish a crash cut short is done again when the run is adopted.
  const publish = async (decided: Outcome): Promise<Outcome> => {
    if (ctx.runFile === ctx.outputFile || decided.lora_sha256 === null) return decided;
    const target = { root: ctx.handoffRoot, file: ctx.outputFile };
    const published = await publishLora(ctx.runFile, target, decided.lora_sha256, ctx.id);
    if (published.ok) return decided;
    const { code, detail } = published.error;
    ctx.log.error("could not publish the LoRA", { job_id: ctx.id, error_code: code, error: detail });
    return { ...decided, status: "failed", error_code: code, error: detail, lora_path: null, lora_sha256: null,
      lora_bytes: null };
  };
  // What the run directory holds after the run decides what can be resumed; one that cannot be read leaves the
  // record as the run left it.
  const closeResumePoint = async (succeeded: boolean): Promise<ResumePoint | null> => {
    try {
      const point = await closingResumePoint(out, ctx.expectedTotal, succeeded, checkpoints);
      if (succeeded) await release(`job ${ctx.id}, which continued from it, succeeded`);
      // A run that ended before its first own state still offers the one it started from.
      if (point.step !== null || inherited === null) return point;
      return { ...point, ...inherited };
    } catch (err) {
      const error = (err as Error).message;
      ctx.log.error("could not read the run's saved states at its end", { job_id: ctx.id, error });
      return null;
    }
  };
  // A trainer that never started trained nothing: the job keeps no dataset copy.
  const removeCopy = () => {
    try {
      ctx.jobDir.removeDataset();
    } catch (err) {
      ctx.log.error("could not remove the dataset copy of a job that never trained", {
        job_id: ctx.id, error: (err as Error).message,
      });
    }
  };
  // A pausing run is read at the watched pace, so it stops at the state it saves next, not one a slow read finds.
  const pause = () => {
    pausing = true;
    guard("pause", () => ctx.store.requestPause(ctx.id, ctx.now().toISOString()));
    ctx.log.info("pausing job at its next saved state", { job_id: ctx.id });
    follower.drain();
  };

  const finished = placement.exit.then(end).catch((err: Error) => {
    ctx.log.error("supervision of the job ended in error", { job_id: ctx.id, error: err.message, stack: err.stack });
  });

  return {
    id: ctx.id,
    pgid: placement.pgid,
    queued: placement.queued,
    progress: () => tracker.progress(),
    unrecorded: () => unrecorded,
    refresh(maxAgeMs) {
      if (follower.sinceRead() >= maxAgeMs) follower.drain();
    },
    stop: (reason) => stop(reason),
    pause,
    finished,
  };
}
