import { cancelledOutcome, failedOutcome, type TokenWindow } from "../job.ts";
import { buildLaunch, type ResumeFrom, trainedWindow } from "../recipe/command.ts";
import type { CheckedTrain } from "../request/check.ts";
import type { Job } from "../store/job-store.ts";
import type { Prepared } from "../supervisor/index.ts";
import type { DispatchContext } from "./context.ts";
import type { Origin } from "./origin.ts";

/**
 * The preparing phase, after the answer: the job directory created and filled (the dataset copied, or a
 * predecessor's copy linked), then the launch planned and what the trainer reads written. It hands the supervisor
 * the launch, which the supervisor starts, or how the job ended before any trainer existed (the fill or the plan
 * failed, or a cancel came first): it trained nothing, and its directory goes whole. Null: its record was ended
 * meanwhile, with nothing left to launch.
 */
export async function prepare(
  ctx: DispatchContext,
  row: Job,
  train: CheckedTrain,
  origin: Origin,
  signal: AbortSignal,
): Promise<Prepared> {
  const dir = ctx.dirs.of(row.id);
  dir.create();
  const prepared = await fillAndPlan(ctx, row, train, origin, signal).catch(async (err: unknown) => {
    await dir.remove();
    throw err;
  });
  if (prepared !== null && "ended" in prepared) await dir.remove();
  return prepared;
}

async function fillAndPlan(
  ctx: DispatchContext, row: Job, train: CheckedTrain, origin: Origin, signal: AbortSignal,
): Promise<Prepared> {
  const filled = await origin.fill(ctx.dirs.of(row.id).dataset, signal);
  const cancelled = ctx.store.get(row.id)?.stop_reason != null;
  if (!filled.ok || cancelled) return { ended: filled.ok ? cancelledOutcome() : filled.error };
  // A record no longer active has nothing left to launch.
  if (!ctx.store.markPrepared(row.id, filled.value)) return null;
  // A fresh copy's own report, or for a resume its predecessor's, which the copy was prepared under.
  const window = trainedWindow((filled.value ?? origin.dataset)?.report);
  return plan(ctx, row, train, origin.resume, window);
}

// The one command, and what it reads written into the job directory: the launch the supervisor starts.
function plan(
  ctx: DispatchContext,
  row: Job,
  train: CheckedTrain,
  resume: ResumeFrom | null,
  window: TokenWindow,
): Prepared {
  const { config, trainer } = ctx;
  const dir = ctx.dirs.of(row.id);
  try {
    const placing = ctx.backend.launch(train.device);
    const plan = buildLaunch(train, config, dir, trainer, placing, window, resume);
    dir.writeRecipe({ datasetToml: plan.dataset_toml, samplePrompts: plan.sample_prompts });
    const launch = {
      argv: plan.argv,
      env: plan.env,
      cwd: plan.cwd,
      log: dir.log,
      logMaxBytes: config.trainer.log_max_bytes,
      inheritEnv: plan.inheritEnv,
      forwardSignals: placing.forwardSignals,
    };
    return { launch, outputFile: train.outputFile };
  } catch (err) {
    const error = `the trainer could not be started: ${(err as Error).message}`;
    ctx.log.error("spawn failed", { job_id: row.id, error });
    return { ended: failedOutcome("spawn_failed", error) };
  }
}
