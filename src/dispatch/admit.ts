import { type Admission, judgeAdmission } from "../gpu/admission.ts";
import type { CheckedTrain } from "../request/check.ts";
import { fail, ok, type Result } from "../result.ts";
import { TIERS } from "../tiers.ts";
import type { DispatchContext } from "./context.ts";
import { diskShortfall } from "./disk.ts";
import type { DispatchRefusal, Refused } from "./refusal.ts";

// Whether anything may be claimed now, asked at admission and again at the claim: a state dir that takes writes,
// and no process of a job of this state dir that no run of ours follows (it may hold the GPU).
export function gate(ctx: DispatchContext): Refused | null {
  const full = ctx.stateHealth.full();
  if (full !== null) return fail({ kind: "state_unwritable", detail: full.error });
  const stray = unsupervised(ctx);
  return stray === null ? null : fail({ kind: "busy", activeId: stray, unsupervised: true });
}

function unsupervised(ctx: DispatchContext): string | null {
  for (const id of ctx.markedJobs()) if (!ctx.supervisor.follows(id) && ctx.dirs.of(id).exists()) return id;
  return null;
}

/** Every slot taken: the first active job, for the answer to name. */
export function busyWith(ctx: DispatchContext): string | null {
  const active = ctx.store.activeJobs();
  return active.length >= ctx.backend.maxActive ? active[0]!.id : null;
}

export function busy(ctx: DispatchContext, activeId: string): Refused {
  const { maxActive: count, maxActiveKey: key } = ctx.backend;
  const limit = count > 1 && key !== null ? { limit: { count, key } } : {};
  return fail({ kind: "busy", activeId, unsupervised: false, ...limit });
}

export function outputInUse(jobId: string, train: CheckedTrain): Refused {
  return fail({ kind: "output_in_use", jobId, outputName: train.request.output_name });
}

/**
 * Whatever its origin, a run is admitted (with admission's warning, if any) before anything is recorded, or
 * refused: the gate, the output, the slot (the claim decides it again), room on disk for `datasetBytes` more, the
 * GPU, the backend.
 */
export async function admit(
  ctx: DispatchContext,
  train: CheckedTrain,
  datasetBytes: number,
): Promise<Result<string | null, DispatchRefusal>> {
  const closed = gate(ctx);
  if (closed !== null) return closed;
  const user = ctx.store.outputUser(train.outputFile);
  if (user !== null) return outputInUse(user, train);
  const holder = busyWith(ctx);
  if (holder !== null) return busy(ctx, holder);
  const shortfall = diskShortfall(ctx.config.state_dir, train.outputDir, TIERS[train.request.tier], datasetBytes);
  if (shortfall !== null) return fail({ kind: "insufficient_disk", shortfall });
  const admission = await judgeGpu(ctx, train);
  if (!admission.ok) return fail({ kind: "refused", refusal: admission.error });
  const refused = await ctx.backend.refusal(train.request);
  if (refused !== null) return fail({ kind: "backend_refused", detail: refused });
  return ok(admission.value);
}

// A fresh probe right before the claim: a cached answer may predate the co-tenant's last model load. A backend
// that places runs itself (Slurm) has GPUs this host's nvidia-smi says nothing about.
async function judgeGpu(ctx: DispatchContext, train: CheckedTrain): Promise<Admission> {
  if (ctx.config.gpu.admission === "off" || !ctx.backend.gpuAdmission) return ok(null);
  const probe = await ctx.gpu.read({ fresh: true });
  return judgeAdmission(probe, train.device, train.request.tier, ctx.config, train.request.samples ?? 0);
}
