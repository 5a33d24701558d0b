import type { AdmissionRefusal } from "../gpu/admission.ts";
import { type DetailItem, listed } from "../request/schema.ts";
import type { Result } from "../result.ts";
import type { Job } from "../store/job-store.ts";
import type { DiskShortfall } from "./disk.ts";

/** Why POST /train (or a resume) started no run: REFUSALS says how each kind is answered. */
export type DispatchRefusal =
  | { kind: "invalid"; detail: DetailItem[] }
  | { kind: "refused"; refusal: AdmissionRefusal }
  | { kind: "output_exists"; detail: string }
  | { kind: "output_in_use"; jobId: string; outputName: string }
  | { kind: "busy"; activeId: string; unsupervised: boolean; limit?: { count: number; key: string } }
  | { kind: "state_unwritable"; detail: string }
  | { kind: "insufficient_disk"; shortfall: DiskShortfall }
  | { kind: "not_resumable"; detail: string }
  | { kind: "base_model_changed"; detail: string }
  | { kind: "no_such_job" }
  | { kind: "backend_refused"; detail: string }
  | { kind: "smoke_unavailable"; detail: string }
  | { kind: "check_busy" };

export type DispatchResult = Result<Job, DispatchRefusal>;

export type Refused = { ok: false; error: DispatchRefusal };

type VramRefusal = Extract<AdmissionRefusal, { reason: "insufficient_vram" | "cotenant_active" }>;
type ProbeRefusal = Extract<AdmissionRefusal, { reason: "gpu_probe_failed" }>;
// A refusal with one answer per kind: GPU admission's refusal stands under its own reason.
type AnsweredRefusal =
  | Exclude<DispatchRefusal, { kind: "refused" }>
  | { kind: "insufficient_vram"; refusal: VramRefusal }
  | { kind: "cotenant_active"; refusal: VramRefusal }
  | { kind: "gpu_probe_failed"; refusal: ProbeRefusal };
type Kind = AnsweredRefusal["kind"];
type Of<K extends Kind> = Extract<AnsweredRefusal, { kind: K }>;

// An answer's body, as JSON.
type RefusalBody = Record<string, unknown>;

interface Row<K extends Kind> {
  // 409 and 503 send a `reason`, and list it in the OpenAPI enum of their answer.
  status: 404 | 409 | 422 | 503;
  retryAfterS?: number;
  // The reason on the wire where it is not the kind's own name.
  reason?: string;
  // The body; `reason` is the row's reason, placed where the answer has always carried it.
  body: (refusal: Of<K>, reason: string) => RefusalBody;
}

const BUSY_RETRY_AFTER_S = 30;
const VRAM_RETRY_AFTER_S = 60;
// A dataset check scores about a photo a second.
const CHECK_RETRY_AFTER_S = 10;

/** The detail of a 404 for a job id the worker does not know. */
export const NO_SUCH_JOB = "no such job";

const busyDetail = ({ activeId, unsupervised, limit }: Of<"busy">) =>
  unsupervised
    ? `processes of job ${activeId} are running but this worker does not supervise them ` +
      "(they are being stopped); no training starts until they are gone"
    : limit === undefined
      ? `another training is running (job ${activeId}); one job runs at a time`
      : `${limit.count} trainings are active (${limit.key}), among them job ${activeId}`;

const said = (r: { detail: string }, reason: string) => ({ detail: r.detail, reason });
const vram = (r: { refusal: VramRefusal }) => ({ ...r.refusal });

/**
 * Every refusal's SPEC §3 answer, one row per kind: its status, its Retry-After and its body. A row of 409 or 503
 * sends its kind (or its own `reason`) as `reason`, and the OpenAPI enums of reasons list those rows in this order.
 */
export const REFUSALS = {
  invalid: { status: 422, body: (r) => ({ detail: listed(r.detail) }) },
  no_such_job: { status: 404, body: () => ({ detail: NO_SUCH_JOB }) },
  busy: {
    status: 409,
    retryAfterS: BUSY_RETRY_AFTER_S,
    body: (r, reason) => ({ detail: busyDetail(r), reason, active_job_id: r.activeId }),
  },
  output_exists: { status: 409, body: said },
  output_in_use: {
    status: 409,
    body: (r, reason) => ({
      detail: `job ${r.jobId} is active and will publish ${r.outputName}.safetensors into the same output_dir; ` +
        "one output, one run",
      reason,
      active_job_id: r.jobId,
    }),
  },
  insufficient_vram: { status: 409, retryAfterS: VRAM_RETRY_AFTER_S, body: vram },
  cotenant_active: { status: 409, retryAfterS: VRAM_RETRY_AFTER_S, body: vram },
  insufficient_disk: { status: 409, body: (r, reason) => ({ reason, ...r.shortfall }) },
  not_resumable: { status: 409, body: said },
  base_model_changed: {
    status: 409,
    body: (r, reason) => ({ detail: r.detail, reason, field: "base_model_path" }),
  },
  smoke_unavailable: { status: 409, body: said },
  check_busy: {
    status: 409,
    retryAfterS: CHECK_RETRY_AFTER_S,
    body: (_, reason) => ({ detail: "another dataset check is running; one runs at a time", reason }),
  },
  gpu_probe_failed: { status: 503, body: (r, reason) => ({ detail: r.refusal.detail, reason }) },
  state_unwritable: {
    status: 503,
    retryAfterS: BUSY_RETRY_AFTER_S,
    body: (r, reason) => ({
      detail: `${r.detail}; no training starts until the state dir takes writes again (see /healthz)`,
      reason,
    }),
  },
  // Only the Slurm backend refuses a run; arbo has always read this as slurm_refused.
  backend_refused: { status: 503, reason: "slurm_refused", body: said },
} satisfies { [K in Kind]: Row<K> };

// A refusal as answered: its status, its body and, where the row has one, its Retry-After in seconds.
interface RefusalAnswer {
  status: Row<Kind>["status"];
  body: RefusalBody;
  retryAfterS?: number;
}

/** The answer REFUSALS gives a refusal. */
export function answerRefusal(refusal: DispatchRefusal): RefusalAnswer {
  const answered = (refusal.kind === "refused"
    ? { kind: refusal.refusal.reason, refusal: refusal.refusal }
    : refusal) as AnsweredRefusal;
  // One row per kind, so the row and the refusal agree; TypeScript cannot follow a union through the index.
  const row = REFUSALS[answered.kind] as Row<Kind>;
  const body = row.body(answered as Of<Kind>, row.reason ?? answered.kind);
  const { status, retryAfterS } = row;
  return retryAfterS === undefined ? { status, body } : { status, body, retryAfterS };
}

// A row's reason on the wire: its own, or its kind.
type ReasonOf<K extends Kind> = (typeof REFUSALS)[K] extends { reason: infer R extends string } ? R : K;
type Reasoned<S> = { [K in Kind]: (typeof REFUSALS)[K]["status"] extends S ? ReasonOf<K> : never }[Kind];

/** The reasons sent with a status, in the table's order: the OpenAPI enum of that answer. */
export function reasonsOf<S extends Row<Kind>["status"]>(status: S): [Reasoned<S>, ...Reasoned<S>[]] {
  const kinds = (Object.keys(REFUSALS) as Kind[]).filter((k) => REFUSALS[k].status === status);
  const reasons = kinds.map((k) => (REFUSALS[k] as Row<Kind>).reason ?? k);
  return reasons as [Reasoned<S>, ...Reasoned<S>[]];
}

/** The reasons an answer of `status` sends Retry-After with, and its seconds: the OpenAPI document declares it. */
export function retryAftersOf(status: Row<Kind>["status"]): Array<{ reason: string; seconds: number }> {
  return (Object.keys(REFUSALS) as Kind[]).flatMap((kind) => {
    const row = REFUSALS[kind] as Row<Kind>;
    if (row.status !== status || row.retryAfterS === undefined) return [];
    return [{ reason: row.reason ?? kind, seconds: row.retryAfterS }];
  });
}
