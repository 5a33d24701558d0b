import { closeSync, openSync } from "node:fs";
import { applyLine, initialProgress, type Progress } from "../progress/progress.ts";
import { LineSplitter } from "../progress/line-splitter.ts";
import type { LaunchPlan } from "../recipe/command.ts";
import { verifySafetensors } from "../safetensors/verify.ts";
import type { JobStore } from "../store/job-store.ts";
import type { Logger } from "../log/logger.ts";
import { followLog } from "./log-follower.ts";
import { tailLines } from "./log-tail.ts";
import { decideOutcome } from "./outcome.ts";
import { identify } from "./proc-stat.ts";
import { liveGroupMembers, terminateGroup } from "./process-group.ts";

// Progress reaches memory at once; the durable row is refreshed at most this often (and at the end).
const PERSIST_INTERVAL_MS = 1000;
const LOG_LINES_FOR_OUTCOME = 200;

export interface RunContext {
  id: string;
  plan: LaunchPlan;
  logPath: string;
  outputFile: string;
  store: JobStore;
  now: () => Date;
  log: Logger;
  cancelGraceMs: number;
}

export interface Run {
  readonly id: string;
  readonly pgid: number;
  progress(): Progress;
  terminate(graceMs: number): Promise<void>;
  readonly finished: Promise<void>;
}

// The child leads its own process group (setsid); its stdout and stderr go straight to the log file.
export function startRun(ctx: RunContext): Run {
  const fd = openSync(ctx.logPath, "a", 0o640);
  let proc: ReturnType<typeof Bun.spawn>;
  try {
    proc = Bun.spawn(ctx.plan.argv, { cwd: ctx.plan.cwd, env: ctx.plan.env, stdio: ["ignore", fd, fd], detached: true });
  } finally {
    closeSync(fd);
  }
  ctx.store.markSpawned(ctx.id, identify(proc.pid), ctx.now().toISOString());
  return supervise(ctx, proc.pid, proc.exited.then(() => ({ exitCode: proc.exitCode, signal: proc.signalCode === null ? null : String(proc.signalCode) })));
}

interface Exit {
  exitCode: number | null;
  signal: string | null;
}

function supervise(ctx: RunContext, pgid: number, exited: Promise<Exit>): Run {
  let progress = initialProgress();
  let persistedAt = 0;
  let killedBySupervisor = false;
  let forcedKill = false;
  let talking = false;
  const splitter = new LineSplitter();
  const persist = () => {
    persistedAt = Date.now();
    ctx.store.saveProgress(ctx.id, progress);
  };
  const onText = (text: string) => {
    // First output: the trainer demonstrably runs.
    if (!talking) {
      talking = true;
      ctx.store.markTraining(ctx.id);
    }
    const before = progress;
    for (const line of splitter.push(text)) progress = applyLine(progress, line);
    if (progress !== before && (progress.phase !== before.phase || Date.now() - persistedAt >= PERSIST_INTERVAL_MS)) persist();
  };
  const follower = followLog(ctx.logPath, onText);

  let termination: Promise<void> = Promise.resolve();
  const stopGroup = (graceMs: number) => {
    termination = termination.then(async () => {
      forcedKill = (await terminateGroup(pgid, graceMs)).forced || forcedKill;
    });
    return termination;
  };
  const terminate = (graceMs: number) => {
    killedBySupervisor = true;
    return stopGroup(graceMs);
  };

  const finished = exited.then(async (exit) => {
    // The leader's exit is not the tree's: wait out a kill in progress, then sweep what is left.
    await termination;
    if (liveGroupMembers(pgid).length > 0) await stopGroup(ctx.cancelGraceMs);
    follower.stop();
    for (const line of splitter.flush()) progress = applyLine(progress, line);
    persist();
    const row = ctx.store.get(ctx.id);
    const outcome = decideOutcome({
      ...exit,
      cancelRequested: row?.cancel_requested_at != null,
      forcedKill,
      killedBySupervisor,
      verdict: await verifySafetensors(ctx.outputFile),
      outputFile: ctx.outputFile,
      logTail: tailLines(ctx.logPath, LOG_LINES_FOR_OUTCOME),
    });
    ctx.store.finish(ctx.id, outcome, ctx.now().toISOString());
    ctx.log.info("job ended", { job_id: ctx.id, status: outcome.status, error_code: outcome.error_code, exit_code: exit.exitCode, signal: exit.signal });
  });

  return {
    id: ctx.id,
    pgid,
    progress: () => progress,
    terminate,
    finished,
  };
}
