import type { Outcome, ResumePoint } from "../job.ts";
import { verifySafetensors } from "../safetensors/verify.ts";
import { closingResumePoint } from "./checkpoints.ts";
import { keepRest, withKept } from "./kept-loras.ts";
import { tailLines } from "../job-dir/log-tail.ts";
import type { ExitWatch } from "./exit-watch.ts";
import { decideOutcome } from "./outcome.ts";
import { publishLora } from "./publish.ts";
import { readOomKills } from "../os/proc.ts";
import { untilDone } from "../os/terminate.ts";
import { stateDirFull } from "../store/state-health.ts";
import { writeUntilDone } from "../store/write-guard.ts";
import { unlinkTmp } from "../job-dir/tmp-link.ts";
import { persist, recordSamples, releaseInherited, type FollowedRun, type RunState } from "./run-state.ts";

const LOG_LINES_FOR_OUTCOME = 200;

// A run's end, in order: nothing of it left running, its output read to the last byte, its outcome decided from
// the evidence, the LoRA published, what can be resumed settled, and all of it on record.

/** Ends a run whose trainer has exited (or was lost): the job's last record. */
export async function endRun(run: FollowedRun, ended: ExitWatch): Promise<void> {
  const { ctx } = run;
  run.watchdog.stop();
  run.states.stop();
  await clearLeftovers(run);
  forgetTmp(run);
  await run.follower.stop();
  try {
    ctx.jobDir.repairLogCuts();
  } catch (err) {
    ctx.log.error("could not repair the log's cut record", { job_id: ctx.id, error: (err as Error).message });
  }
  run.tracker.flush();
  persist(run);
  const decided = await decide(run, ended);
  const outcome = decided.status === "succeeded" ? await publish(run, decided) : decided;
  const point = await closeResumePoint(run, outcome.status === "succeeded");
  await recordSamples(run);
  await run.likeness.end(run.kept);
  await recordEnd(run, outcome, point);
  if ("spawn_error" in ended) removeCopy(run);
  ctx.changed();
  ctx.log[outcome.status === "failed" ? "warn" : "info"]("job ended", {
    job_id: ctx.id,
    status: outcome.status,
    error_code: outcome.error_code,
    exit_code: outcome.exit_code,
    signal: outcome.signal,
  });
}

// The leader's exit is not the tree's: a kill in progress is waited out, then what is left is cleared.
async function clearLeftovers(run: RunState): Promise<void> {
  const { ctx } = run;
  await run.stopping;
  const forced = await untilDone(
    () => run.placement.clear(ctx.graceMs),
    (err) => {
      ctx.log.error("could not yet sweep the job's leftovers; retrying", { job_id: ctx.id, error: err.message });
    },
  );
  run.forcedKill ||= forced;
}

// The shim removes the trainer's TMPDIR link as the trainer ends; a run adopted after its shim was killed has none
// left to do it, so the worker does, where it can see the link (on this host).
function forgetTmp({ ctx }: RunState): void {
  try {
    unlinkTmp(ctx.jobDir.dir);
  } catch (err) {
    ctx.log.error("could not remove the run's TMPDIR link", { job_id: ctx.id, error: (err as Error).message });
  }
}

async function decide(run: RunState, ended: ExitWatch): Promise<Outcome> {
  const { ctx, tracker, oomKillsAtStart } = run;
  return decideOutcome({
    ended,
    stopReason: run.stopReason ?? ctx.record.read()?.stop_reason ?? null,
    forcedKill: run.forcedKill,
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
}

// The verified LoRA goes into arbo's output_dir; until it is there the job has not succeeded. The run directory
// keeps its copy, so a publish a crash cut short is done again when the run is adopted.
async function publish(run: RunState, decided: Outcome): Promise<Outcome> {
  const { ctx } = run;
  if (ctx.runFile === ctx.outputFile || decided.lora_sha256 === null) return decided;
  const target = { root: ctx.handoffRoot, file: ctx.outputFile };
  const published = await publishLora(ctx.runFile, target, decided.lora_sha256, ctx.id);
  if (published.ok) return decided;
  const { code, detail } = published.error;
  ctx.log.error("could not publish the LoRA", { job_id: ctx.id, error_code: code, error: detail });
  return { ...decided, status: "failed", error_code: code, error: detail, lora_path: null, lora_sha256: null,
    lora_bytes: null };
}

// What the run directory holds after the run decides what can be resumed; one that cannot be read leaves the
// record as the run left it.
async function closeResumePoint(run: RunState, succeeded: boolean): Promise<ResumePoint | null> {
  const { ctx } = run;
  try {
    run.kept = await keepRest(run.out, ctx.previewSteps, run.kept);
    const closed = await closingResumePoint(run.out, ctx.expectedTotal, succeeded, run.checkpoints);
    const point = { ...closed, checkpoints: withKept(closed.checkpoints, run.kept) };
    if (succeeded) await releaseInherited(run, `job ${ctx.id}, which continued from it, succeeded`);
    // A run that ended before its first own state still offers the one it started from.
    if (point.step !== null || run.inherited === null) return point;
    return { ...point, ...run.inherited };
  } catch (err) {
    const error = (err as Error).message;
    ctx.log.error("could not read the run's saved states at its end", { job_id: ctx.id, error });
    return null;
  }
}

// The outcome is known: while the state dir cannot take it, it is answered from memory, marked so.
async function recordEnd(run: RunState, outcome: Outcome, point: ResumePoint | null): Promise<void> {
  const { ctx, tracker } = run;
  const endedAt = ctx.now().toISOString();
  const record = () => {
    if (point !== null) ctx.record.saveResumePoint(point);
    ctx.record.saveProgress(tracker.progress());
    ctx.record.appendLoss(tracker.pendingLoss());
    ctx.record.finish(outcome, endedAt);
  };
  await writeUntilDone(run.guard, "final record", record, () => {
    run.unrecorded = { outcome, ended_at: endedAt };
    ctx.changed();
  });
}

// A trainer that never started trained nothing: the job keeps no dataset copy.
function removeCopy(run: RunState): void {
  try {
    run.ctx.jobDir.removeDataset();
  } catch (err) {
    run.ctx.log.error("could not remove the dataset copy of a job that never trained", {
      job_id: run.ctx.id, error: (err as Error).message,
    });
  }
}
