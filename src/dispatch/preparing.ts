import { cancelledOutcome, failedOutcome, type Outcome, type TokenWindow } from "../job.ts";
import { buildLaunch, type ResumeFrom, trainedWindow } from "../recipe/command.ts";
import type { CheckedTrain } from "../request/check.ts";
import type { Job } from "../store/job-store.ts";
import type { DispatchContext } from "./context.ts";
import type { Origin } from "./origin.ts";

/**
 * The preparing phase, after the answer: the job directory created and filled (the dataset copied, or a
 * predecessor's copy linked), then the launch. The job ends here, before any trainer exists, when the fill or the
 * launch fails or a cancel came first: it trained nothing, and its directory goes whole.
 */
export async function prepare(
  ctx: DispatchContext,
  row: Job,
  train: CheckedTrain,
  origin: Origin,
  signal: AbortSignal,
): Promise<Outcome | null> {
  const dir = ctx.dirOf(row.id);
  dir.create();
  const ended = await fillAndLaunch(ctx, row, train, origin, signal).catch(async (err: unknown) => {
    await dir.remove();
    throw err;
  });
  if (ended !== null) await dir.remove();
  return ended;
}

async function fillAndLaunch(ctx: DispatchContext, row: Job, train: CheckedTrain, origin: Origin, signal: AbortSignal) {
  const filled = await origin.fill(ctx.dirOf(row.id).dataset, signal);
  const cancelled = ctx.store.get(row.id)?.stop_reason != null;
  if (!filled.ok || cancelled) return filled.ok ? cancelledOutcome() : filled.error;
  // A record no longer active has nothing left to launch.
  if (!ctx.store.markPrepared(row.id, filled.value)) return null;
  // A fresh copy's own report, or for a resume its predecessor's, which the copy was prepared under.
  const window = trainedWindow((filled.value ?? origin.dataset)?.report);
  return launch(ctx, row, train, origin.resume, window);
}

async function launch(
  ctx: DispatchContext,
  row: Job,
  train: CheckedTrain,
  resume: ResumeFrom | null,
  window: TokenWindow,
): Promise<Outcome | null> {
  const { config, trainer, log } = ctx;
  const dir = ctx.dirOf(row.id);
  try {
    const placing = ctx.backend.launch(train.device);
    const plan = buildLaunch(train, config, dir, trainer, placing, window, resume);
    dir.writeRecipe({ datasetToml: plan.dataset_toml, samplePrompts: plan.sample_prompts });
    const launchFile = {
      argv: plan.argv,
      env: plan.env,
      cwd: plan.cwd,
      log: dir.log,
      logMaxBytes: config.trainer.log_max_bytes,
      inheritEnv: plan.inheritEnv,
      forwardSignals: placing.forwardSignals,
    };
    await ctx.supervisor.start(ctx.store.get(row.id) ?? row, train.outputFile, launchFile);
  } catch (err) {
    const error = `the trainer could not be started: ${(err as Error).message}`;
    log.error("spawn failed", { job_id: row.id, error });
    return failedOutcome("spawn_failed", error);
  }
  log.info("job started", {
    job_id: row.id,
    tier: train.request.tier,
    device_index: train.device.index,
    simulated: trainer.simulated,
    ...(resume === null ? {} : { resumed_from: row.resumed_from, resume_step: resume.step }),
  });
  return null;
}
