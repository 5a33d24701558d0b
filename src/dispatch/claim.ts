import { randomUUID } from "node:crypto";
import type { CheckedTrain } from "../request/check.ts";
import { recheckPaths } from "../request/check.ts";
import type { DetailItem, JobRequest } from "../request/schema.ts";
import { fail, ok } from "../result.ts";
import { type Job, StoreWriteFailed } from "../store/job-store.ts";
import { busy, gate, outputInUse } from "./admit.ts";
import type { DispatchContext } from "./context.ts";
import type { Origin } from "./origin.ts";
import { prepare } from "./preparing.ts";
import type { DispatchResult } from "./refusal.ts";
import { sha256Hex } from "../fs.ts";

/** Who claims: the request's Idempotency-Key, how to find a retry of it, and what admission warned of. */
export interface Claimant {
  key: string | null;
  retry: () => DispatchResult | null;
  admissionWarning: string | null;
}

/**
 * A retried request is the same job: the one its Idempotency-Key claimed (if it asked the same), or without a key
 * an active job that asks the same.
 */
export function retryOf(
  ctx: DispatchContext,
  key: string | null,
  same: (job: Job) => boolean,
  mismatch: string,
): DispatchResult | null {
  if (key === null) {
    const active = ctx.store.activeJobs().find(same);
    return active ? ok(active) : null;
  }
  const keyed = ctx.store.byIdempotencyKey(key);
  if (keyed === null) return null;
  return same(keyed) ? ok(keyed) : fail({ kind: "invalid", detail: [keyReused(mismatch)] });
}

/** The 422 item of an Idempotency-Key that already claimed a job for another request. */
export function keyReused(msg: string): DetailItem {
  return { loc: ["header", "Idempotency-Key"], msg, type: "idempotency_mismatch" };
}

/**
 * A refusal may be the mark of the very job this request retries, claimed while it was being checked (its output
 * in use, the slot taken, the state resumed): that job is the answer.
 */
export function unlessRetried(result: DispatchResult, retry: () => DispatchResult | null): DispatchResult {
  return result.ok ? result : (retry() ?? result);
}

/**
 * Synchronous from the last look to the insert, so no other request slips in between; a retry that claimed
 * meanwhile is that job. The claimed job keeps the slot while it is prepared, and is answered at once.
 */
export function claim(ctx: DispatchContext, train: CheckedTrain, origin: Origin, claimant: Claimant): DispatchResult {
  const again = claimant.retry();
  if (again) return again;
  // The dataset may have changed since the request was checked: resolve every path once more.
  const changed = recheckPaths(train, ctx.config);
  if (changed.length > 0) return fail({ kind: "invalid", detail: changed });
  const closed = gate(ctx);
  if (closed !== null) return closed;
  const id = randomUUID();
  try {
    const claimed = ctx.store.insertIfIdle({
      id,
      request: train.request,
      requestHash: requestHash(train.request),
      idempotencyKey: claimant.key,
      admissionWarning: claimant.admissionWarning,
      simulated: ctx.trainer.simulated,
      logPath: ctx.dirs.of(id).log,
      now: ctx.now().toISOString(),
      totalSteps: ctx.trainer.expectedTotal(train.request.tier),
      phase: "preparing",
      dataset: origin.dataset,
      outputFile: train.outputFile,
      resumes: origin.resumes,
      samples: origin.samples,
      baseModelPrint: origin.baseModelPrint,
      maxActive: ctx.backend.maxActive,
    });
    if (!claimed.ok) {
      const refusal = claimed.error;
      if ("resumedBy" in refusal) return ctx.resumeChecks.alreadyResumed(origin.resumes?.id ?? "", refusal.resumedBy);
      if ("outputUser" in refusal) return outputInUse(refusal.outputUser, train);
      return busy(ctx, refusal.activeId);
    }
  } catch (err) {
    if (err instanceof StoreWriteFailed) return fail({ kind: "state_unwritable", detail: err.message });
    throw err;
  }
  const row = ctx.store.get(id)!;
  ctx.supervisor.prepare(id, (signal) => prepare(ctx, row, train, origin, signal));
  return ok(row);
}

/** Field order does not make two bodies different requests. */
export function requestHash(request: JobRequest): string {
  const canonical = JSON.stringify(Object.fromEntries(Object.entries(request).sort(([a], [b]) => a.localeCompare(b))));
  return sha256Hex(canonical);
}
