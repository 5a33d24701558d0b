import type { AdmissionRefusal } from "../gpu/admission.ts";
import type { DetailItem } from "../request/schema.ts";
import type { Result } from "../result.ts";
import type { Job } from "../store/job-store.ts";
import type { DiskShortfall } from "./disk.ts";

/** Why POST /train (or a resume) started no run: api/errors.ts turns each kind into its answer. */
export type DispatchRefusal =
  | { kind: "invalid"; detail: DetailItem[] }
  | { kind: "idempotency_mismatch"; detail: string }
  | { kind: "refused"; refusal: AdmissionRefusal }
  | { kind: "output_exists"; detail: string }
  | { kind: "output_in_use"; jobId: string; outputName: string }
  | { kind: "busy"; activeId: string; unsupervised: boolean; limit?: number }
  | { kind: "state_unwritable"; detail: string }
  | { kind: "insufficient_disk"; shortfall: DiskShortfall }
  | { kind: "not_resumable"; detail: string }
  | { kind: "base_model_changed"; detail: string }
  | { kind: "no_such_job" }
  | { kind: "slurm_refused"; detail: string }
  | { kind: "smoke_unavailable"; detail: string };

export type DispatchResult = Result<Job, DispatchRefusal>;

export type Refused = { ok: false; error: DispatchRefusal };
