import type { Config } from "../../../config/schema.ts";
import { JOB_MARKER_ENV, identify, isSameProcess, type ProcessIdentity } from "../../../os/proc.ts";
import {
  liveGroupMembers, signalGroup, sweepStrays, terminateGroup, untilDone, waitGroupGone,
} from "../../../os/terminate.ts";
import { type ExitWatch, watchExit } from "../../exit-watch.ts";
import type { Backend, Placement, PlacementRequest, Recovery, ShimCommand, Started } from "../../placement.ts";
import { localChecks } from "./local-checks.ts";
import { type Identities, judgeLocal } from "./recovery.ts";

const TRAINER_START_TIMEOUT_MS = 15_000;

// One run at a time, on the GPU the request names, bounded by the tier from its start.
export function localBackend(config: Config, shim: ShimCommand): Backend {
  return {
    kind: "local",
    maxActive: 1,
    maxActiveKey: null,
    gpuAdmission: true,
    facts: { backend: "local" },
    launch: (device) => ({ env: { CUDA_VISIBLE_DEVICES: String(device.index) }, forwardSignals: false }),
    refusal: async () => null,
    deadline: (startedAt, boundMs) => startedAt + boundMs,
    start: (request) => startRun(request, shim),
    recover(found, request): Recovery {
      const ids = judgeLocal(found);
      if (typeof ids === "string") return { gone: ids };
      const detail = { shim_pid: ids.shim?.pid ?? null, pid: ids.trainer?.pid ?? null };
      return { placement: adoptedPlacement(request, ids), detail };
    },
    checks: (devDir, relax) => localChecks(config, devDir, relax),
    nodes: null,
  };
}

// The worker starts a shim (this program's `shim` command) in its own session; the shim starts the trainer
// and records its end. The job's files are written already, so a worker that restarts at any moment finds the job.
async function startRun(ctx: PlacementRequest, shim: ShimCommand): Promise<Started> {
  const env = { PATH: shim.path, [JOB_MARKER_ENV]: ctx.id };
  const shimProcess = Bun.spawn([...shim.command, "shim", ctx.jobDir.dir], {
    stdio: ["ignore", "ignore", "ignore"],
    detached: true,
    env,
  });
  try {
    const shimIdentity = identify(shimProcess.pid);
    ctx.report.shim(shimIdentity);
    const trainer = waitForTrainer(ctx, shimIdentity).then(reportTrainer(ctx));
    const exit = watchExit(ctx.jobDir.dir, () => isSameProcess(shimIdentity), shimProcess.exited);
    return { placement: localPlacement(ctx, shimIdentity, trainer, exit), state: null };
  } catch (err) {
    await abandon(ctx, shimProcess.pid);
    throw new Error(
      `${(err as Error).message} (after the trainer's shim had started; it and everything it started were stopped)`,
    );
  }
}

// A run whose worker restarted: the same placement, identities from the record or the job's files (reported, so
// the record has those it lacked).
function adoptedPlacement(ctx: PlacementRequest, ids: Identities): Placement {
  const { shim } = ids;
  if (shim) reportShim(ctx, shim);
  if (ids.trainer) ctx.report.trainer(ids.trainer);
  const alive = () => shim !== null && isSameProcess(shim);
  // A live shim that has not yet named its trainer is about to: wait for it as a fresh launch would.
  const trainer = ids.trainer === null && shim !== null
    ? waitForTrainer(ctx, shim).then(reportTrainer(ctx))
    : Promise.resolve(ids.trainer);
  return localPlacement(ctx, shim, trainer, watchExit(ctx.jobDir.dir, alive));
}

// The shim exits right after it records the trainer's end; one that lingers is swept with the rest.
const SHIM_EXIT_WAIT_MS = 1000;

// This host: the trainer leads its own process group; without a known trainer (its shim gone before naming it),
// the job's marker finds what is left.
function localPlacement(
  ctx: PlacementRequest,
  shim: ProcessIdentity | null,
  trainer: Promise<ProcessIdentity | null>,
  exit: Promise<ExitWatch>,
): Placement {
  let pgid: number | null = null;
  void trainer.then((t) => {
    pgid = t?.pid ?? null;
  });
  return {
    exit,
    pgid: () => pgid,
    queued: () => null,
    async stop(graceMs) {
      const identity = await trainer;
      return identity ? (await terminateGroup(identity.pid, graceMs)).forced : (await sweepStrays(ctx.id)) > 0;
    },
    async clear(graceMs) {
      const identity = await trainer;
      const forced =
        identity !== null &&
        liveGroupMembers(identity.pid).length > 0 &&
        (await terminateGroup(identity.pid, graceMs)).forced;
      if (shim) await shimGone(shim);
      await sweepStrays(ctx.id);
      return forced;
    },
  };
}

async function shimGone(shim: ProcessIdentity): Promise<void> {
  const deadline = performance.now() + SHIM_EXIT_WAIT_MS;
  while (isSameProcess(shim) && performance.now() < deadline) await Bun.sleep(10);
  if (isSameProcess(shim)) signalGroup(shim.pid, "SIGKILL");
}

const reportTrainer = (ctx: PlacementRequest) => (identity: ProcessIdentity | null) => {
  if (identity) ctx.report.trainer(identity);
  return identity;
};

// A shim found after a restart is followed even when the record cannot take it now.
function reportShim(ctx: PlacementRequest, shim: ProcessIdentity): void {
  try {
    ctx.report.shim(shim);
  } catch (err) {
    ctx.log.error("could not record the shim of a re-adopted job", { job_id: ctx.id, error: (err as Error).message });
  }
}

// Nothing of a failed launch may run on: the shim first (so it starts nothing more), then the trainer, then
// strays. What made the launch fail (no descriptor left, say) can make the stopping fail too: it is retried.
async function abandon(ctx: PlacementRequest, shimPid: number): Promise<void> {
  signalGroup(shimPid, "SIGKILL");
  await untilDone(
    async () => {
      await waitGroupGone(shimPid, ctx.graceMs);
      const trainer = ctx.jobDir.readTrainer();
      if (trainer && isSameProcess(trainer)) await terminateGroup(trainer.pid, ctx.graceMs);
      await sweepStrays(ctx.id);
    },
    (err) => {
      const error = err.message;
      ctx.log.error("could not yet stop what a failed launch started; retrying", { job_id: ctx.id, error });
    },
  );
}

async function waitForTrainer(ctx: PlacementRequest, shim: ProcessIdentity): Promise<ProcessIdentity | null> {
  const deadline = Date.now() + TRAINER_START_TIMEOUT_MS;
  for (;;) {
    const trainer = ctx.jobDir.readTrainer();
    if (trainer) return trainer;
    if (Date.now() > deadline || !isSameProcess(shim)) return ctx.jobDir.readTrainer();
    await Bun.sleep(5);
  }
}
