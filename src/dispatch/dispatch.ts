import { checkRequest, checkResume, everyFault } from "../request/check.ts";
import { readTrain } from "../request/read-train.ts";
import { type DetailItem, type JobRequest, readBody, ResumeRequest } from "../request/schema.ts";
import { fail } from "../result.ts";
import type { Job } from "../store/job-store.ts";
import { admit, busyWith } from "./admit.ts";
import { claim, keyReused, requestHash, retryOf, unlessRetried } from "./claim.ts";
import { type DispatchContext, dispatchContext, type DispatcherDeps } from "./context.ts";
import { readCopy } from "./dataset-copy.ts";
import { createDatasetCheck } from "./dataset-check.ts";
import { identityBeforeClaim } from "./identity-gate.ts";
import { freshOrigin, resumeOrigin } from "./origin.ts";
import type { DispatchResult, Refused } from "./refusal.ts";

export type Dispatcher = ReturnType<typeof createDispatcher>;

const OTHER_BODY = "this Idempotency-Key was already used with a different request body";
const OTHER_REQUEST = "this Idempotency-Key was already used for another request";

// POST /train and POST /train/{id}/resume, each a straight pipeline over one context (dispatchRequest and resume):
// parse → retry → check → admit (admit.ts) → origin (origin.ts) → claim (claim.ts) → answer; after the answer, the
// job's preparing phase (preparing.ts: its dataset copied or linked, then the launch) is held by the supervisor.
// Every fault of a request is answered in one 422; `faults` are those only the raw request showed (api/body.ts).
export function createDispatcher(deps: DispatcherDeps) {
  const ctx = dispatchContext(deps);
  return {
    /** POST /dataset/check: the dataset report a request's job would get, without the job. */
    checkDataset: createDatasetCheck(ctx),

    async dispatch(
      body: unknown,
      idempotencyKey: string | null = null,
      faults: readonly DetailItem[] = [],
    ): Promise<DispatchResult> {
      const read = readTrain(body, faults);
      if (read.request !== null) return dispatchRequest(ctx, read.request, idempotencyKey);
      const detail = [...(await everyFault(read, ctx.config)), ...reusedKey(ctx, idempotencyKey, OTHER_BODY)];
      return fail({ kind: "invalid", detail });
    },

    // A request the worker composed itself (a smoke run), through every step one from arbo takes.
    dispatchComposed: (request: JobRequest): Promise<DispatchResult> => dispatchRequest(ctx, request, null),

    /** Whether a run could be claimed now, so a caller can refuse before it writes anything. */
    busyWith: () => busyWith(ctx),

    // POST /train/{id}/resume: a retry (the same Idempotency-Key, or while the successor runs) is the same job.
    // `body` may ask for other previews than the predecessor's; nothing else of its request changes.
    async resume(
      predecessorId: string,
      key: string | null = null,
      body: unknown = {},
      faults: readonly DetailItem[] = [],
    ): Promise<DispatchResult> {
      const asked = readBody(ResumeRequest, body, faults);
      if (asked.data === null) {
        return fail({ kind: "invalid", detail: [...asked.detail, ...reusedKey(ctx, key, OTHER_REQUEST)] });
      }
      const job = ctx.store.get(predecessorId);
      if (!job) return fail({ kind: "no_such_job" });
      const samplesAsked = asked.data.samples;
      const sameSamples = (row: Job) => samplesAsked === undefined || row.request.samples === samplesAsked;
      const successor = (row: Job) => row.resumed_from === predecessorId && sameSamples(row);
      const retry = () => retryOf(ctx, key, successor, OTHER_REQUEST);
      const earlier = retry();
      if (earlier) return earlier;
      return unlessRetried(await resumeFresh(ctx, job, samplesAsked, key, retry), retry);
    },
  };
}

// A request with a fault is never the one a key claimed a job for: a key on record is one reused.
function reusedKey(ctx: DispatchContext, key: string | null, msg: string): DetailItem[] {
  return key !== null && ctx.store.byIdempotencyKey(key) !== null ? [keyReused(msg)] : [];
}

// A request parsed once, from a body or composed by the worker: retry → check → refusals → origin → claim.
async function dispatchRequest(ctx: DispatchContext, request: JobRequest, key: string | null): Promise<DispatchResult> {
  const hash = requestHash(request);
  const retry = () => retryOf(ctx, key, (job) => job.request_hash === hash, OTHER_BODY);
  // Before the filesystem checks: a retry after success must not read as "output exists".
  const earlier = retry();
  if (earlier?.ok) return earlier;
  if (earlier) return withFaults(earlier, await checkRequest(request, ctx.config));
  return unlessRetried(await dispatchFresh(ctx, request, key, retry), retry);
}

// A key used with another body, answered with the request's own faults, if it has any, in one 422.
function withFaults(reused: Refused, checked: Awaited<ReturnType<typeof checkRequest>>): Refused {
  if (checked.ok || checked.error.kind !== "invalid" || reused.error.kind !== "invalid") return reused;
  return fail({ kind: "invalid", detail: [...checked.error.detail, ...reused.error.detail] });
}

// A request's own steps, after its retry check.
async function dispatchFresh(
  ctx: DispatchContext,
  request: JobRequest,
  key: string | null,
  retry: () => DispatchResult | null,
): Promise<DispatchResult> {
  const checked = await checkRequest(request, ctx.config);
  if (!checked.ok) return checked;
  const train = checked.value;
  const admitted = await admit(ctx, train, train.dataset.bytes);
  if (!admitted.ok) return admitted;
  const identity = await identityBeforeClaim(ctx, train);
  if (!identity.ok) return identity;
  const origin = await freshOrigin(train, ctx.captionTokensOf, ctx.scorer, identity.value);
  return claim(ctx, train, origin, { key, retry, admissionWarning: admitted.value });
}

// A resume's own steps, after its retry check: resumable → its copy → check → refusals → claim.
async function resumeFresh(
  ctx: DispatchContext,
  job: Job,
  samplesAsked: number | undefined,
  key: string | null,
  retry: () => DispatchResult | null,
): Promise<DispatchResult> {
  const from = await ctx.resumeChecks.resumable(job);
  if (!from.ok) return from;
  const copy = readCopy(ctx.dirs.of(job.id).dataset);
  if (copy === null) {
    const detail = `job ${job.id} cannot be resumed: its dataset copy is missing from its job directory`;
    return fail({ kind: "not_resumable", detail });
  }
  const request = samplesAsked === undefined ? job.request : { ...job.request, samples: samplesAsked };
  const checked = await checkResume(request, copy, ctx.config);
  if (!checked.ok) return checked;
  const train = checked.value;
  const admitted = await admit(ctx, train, 0);
  if (!admitted.ok) return admitted;
  const replaced = await ctx.resumeChecks.baseModelReplaced(job, train);
  if (replaced !== null) return replaced;
  const origin = resumeOrigin(job, from.value, copy, train);
  return claim(ctx, train, origin, { key, retry, admissionWarning: admitted.value });
}
