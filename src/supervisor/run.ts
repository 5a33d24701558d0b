import { closeSync, openSync } from "node:fs";
import type { Logger } from "../log/logger.ts";
import { LineSplitter } from "../progress/line-splitter.ts";
import { parseTqdmBar } from "../progress/tqdm-bar.ts";
import { applyLine, initialProgress, type Progress } from "../progress/progress.ts";
import { verifySafetensors } from "../safetensors/verify.ts";
import type { JobRow, JobStore, LossPoint, StopReason } from "../store/job-store.ts";
import { watchExit, type ExitWatch } from "./exit-watch.ts";
import { readTrainer, type LaunchFile, launchPath, writeJsonAtomic } from "./job-files.ts";
import { followLog } from "./log-follower.ts";
import { tailLines } from "./log-tail.ts";
import { decideOutcome } from "./outcome.ts";
import { identify, isSameProcess, type ProcessIdentity } from "./proc-stat.ts";
import { liveGroupMembers, terminateGroup } from "./process-group.ts";
import { sweepStrays } from "./stray-sweep.ts";
import { startWatchdog } from "./watchdog.ts";

// Progress reaches memory at once; the durable row is refreshed at most this often (and at the end).
const PERSIST_INTERVAL_MS = 1000;
const LOG_LINES_FOR_OUTCOME = 200;
const TRAINER_START_TIMEOUT_MS = 15_000;

export interface RunContext {
  id: string;
  dir: string;
  logPath: string;
  outputFile: string;
  store: JobStore;
  now: () => Date;
  log: Logger;
  graceMs: number;
  stallMs: number;
  deadline: number;
  nanUpdates: number;
  /** Called after every change a watcher could see: progress, status, the end. */
  changed: () => void;
}

export interface Run {
  readonly id: string;
  pgid(): number | null;
  progress(): Progress;
  stop(reason: StopReason): Promise<void>;
  readonly finished: Promise<void>;
}

// The worker starts a shim (this program's `shim` command) in its own session; the shim starts
// the trainer and records its end. The log file is created first so it can be followed at once.
export function startRun(ctx: RunContext, launch: LaunchFile, shimCommand: string[]): Run {
  writeJsonAtomic(launchPath(ctx.dir), launch);
  closeSync(openSync(ctx.logPath, "a", 0o640));
  const shim = Bun.spawn([...shimCommand, "shim", ctx.dir], { stdio: ["ignore", "ignore", "ignore"], detached: true, env: { PATH: process.env.PATH ?? "/usr/bin:/bin" } });
  const shimIdentity = identify(shim.pid);
  ctx.store.markShim(ctx.id, shimIdentity);
  const trainer = waitForTrainer(ctx, shimIdentity).then((identity) => {
    if (identity) ctx.store.markSpawned(ctx.id, identity, ctx.now().toISOString());
    return identity;
  });
  return supervise(ctx, trainer, watchExit(ctx.dir, () => isSameProcess(shimIdentity), shim.exited));
}

// A run whose worker restarted: same bookkeeping, identities from the record.
export function adoptRun(ctx: RunContext, row: JobRow): Run {
  const shim = { pid: row.shim_pid ?? -1, startTicks: row.shim_start_ticks, bootId: row.boot_id };
  const trainer = row.pid === null ? null : { pid: row.pid, startTicks: row.pid_start_ticks, bootId: row.boot_id };
  return supervise(ctx, Promise.resolve(trainer), watchExit(ctx.dir, () => isSameProcess(shim)));
}

async function waitForTrainer(ctx: RunContext, shim: ProcessIdentity): Promise<ProcessIdentity | null> {
  const deadline = Date.now() + TRAINER_START_TIMEOUT_MS;
  for (;;) {
    const trainer = readTrainer(ctx.dir);
    if (trainer) return trainer;
    if (Date.now() > deadline || !isSameProcess(shim)) return readTrainer(ctx.dir);
    await Bun.sleep(5);
  }
}

function supervise(ctx: RunContext, trainer: Promise<ProcessIdentity | null>, exit: Promise<ExitWatch>): Run {
  let progress = initialProgress();
  let persistedAt = 0;
  let talking = false;
  let pgid: number | null = null;
  let stopping: Promise<unknown> = Promise.resolve();
  let forcedKill = false;
  const splitter = new LineSplitter();
  let lossPoints: LossPoint[] = [];
  void trainer.then((t) => {
    pgid = t?.pid ?? null;
  });

  const persist = () => {
    persistedAt = Date.now();
    ctx.store.saveProgress(ctx.id, progress);
    ctx.store.appendLoss(ctx.id, lossPoints);
    lossPoints = [];
  };
  const apply = (line: string) => {
    const next = applyLine(progress, line);
    const lossChanged = next.loss !== progress.loss || next.last_loss_nan !== progress.last_loss_nan;
    if (next.step > 0 && (next.step !== progress.step || lossChanged)) lossPoints.push([next.step, next.last_loss_nan ? null : next.loss]);
    progress = next;
  };
  const killGroup = async () => {
    const identity = await trainer;
    if (identity) forcedKill = (await terminateGroup(identity.pid, ctx.graceMs)).forced || forcedKill;
  };
  // Why is recorded before the first signal, so the exit reads as that and not as a crash.
  const stop = (reason: StopReason) => {
    ctx.store.requestStop(ctx.id, reason, ctx.now().toISOString());
    ctx.log.info("stopping job", { job_id: ctx.id, reason });
    stopping = stopping.then(killGroup);
    return stopping.then(() => undefined);
  };
  const watchdog = startWatchdog({ stallMs: ctx.stallMs, deadline: ctx.deadline }, (reason) => void stop(reason));
  const onText = (text: string) => {
    watchdog.touch();
    const firstWords = !talking;
    if (firstWords) {
      talking = true;
      ctx.store.markTraining(ctx.id);
    }
    const before = progress;
    for (const line of splitter.push(text)) apply(line);
    // A bar redraw is whole once its "]" is written; waiting for the next "\r" would report every
    // step a step late (a whole step, at SDXL's pace). Applying it again later changes nothing.
    const drawing = splitter.pending();
    if (drawing.endsWith("]") && parseTqdmBar(drawing)?.trailing === "") apply(drawing);
    if (progress.nan_streak >= ctx.nanUpdates && before.nan_streak < ctx.nanUpdates) void stop("nan_loss");
    if (progress !== before && (progress.phase !== before.phase || Date.now() - persistedAt >= PERSIST_INTERVAL_MS)) persist();
    if (progress !== before || firstWords) ctx.changed();
  };
  const follower = followLog(ctx.logPath, onText);

  const finished = exit.then(async (ended) => {
    watchdog.stop();
    // The leader's exit is not the tree's: wait out a kill in progress, then sweep what is left.
    await stopping;
    const identity = await trainer;
    if (identity && liveGroupMembers(identity.pid).length > 0) forcedKill = (await terminateGroup(identity.pid, ctx.graceMs)).forced || forcedKill;
    await sweepStrays(ctx.id);
    follower.stop();
    for (const line of splitter.flush()) apply(line);
    persist();
    const row = ctx.store.get(ctx.id);
    const outcome = decideOutcome({
      ended,
      stopReason: row?.stop_reason ?? null,
      forcedKill,
      lastLossNan: progress.last_loss_nan,
      verdict: await verifySafetensors(ctx.outputFile),
      outputFile: ctx.outputFile,
      logTail: tailLines(ctx.logPath, LOG_LINES_FOR_OUTCOME),
    });
    ctx.store.finish(ctx.id, outcome, ctx.now().toISOString());
    ctx.changed();
    ctx.log.info("job ended", { job_id: ctx.id, status: outcome.status, error_code: outcome.error_code, exit_code: outcome.exit_code, signal: outcome.signal });
  });

  return { id: ctx.id, pgid: () => pgid, progress: () => progress, stop, finished };
}
