import type { DispatchRefusal } from "../dispatch/refusal.ts";

const BUSY_RETRY_AFTER_S = "30";
const VRAM_RETRY_AFTER_S = "60";

// The one error type that becomes an HTTP answer; everything else is a logged 500.
export class ApiError extends Error {
  constructor(
    readonly status: 400 | 401 | 404 | 405 | 408 | 409 | 413 | 415 | 422 | 503,
    readonly body: Record<string, unknown>,
    readonly headers: Record<string, string> = {},
  ) {
    super(typeof body.detail === "string" ? body.detail : `HTTP ${status}`);
  }
}

export const noSuchJob = () => new ApiError(404, { detail: "no such job" });

// Every refusal of POST /train becomes its SPEC §3 answer here; the route only handles success.
export function refusalError(result: DispatchRefusal): ApiError {
  switch (result.kind) {
    case "invalid":
      return new ApiError(422, { detail: result.detail });
    case "idempotency_mismatch":
      return new ApiError(422, {
        detail: [{ loc: ["header", "Idempotency-Key"], msg: result.detail, type: "idempotency_mismatch" }],
      });
    case "output_exists":
      return new ApiError(409, { detail: result.detail, reason: "output_exists" });
    case "output_in_use": {
      const detail = `job ${result.jobId} is active and will publish ${result.outputName}.safetensors into the ` +
        "same output_dir; one output, one run";
      return new ApiError(409, { detail, reason: "output_in_use", active_job_id: result.jobId });
    }
    case "refused": {
      const { refusal } = result;
      if (refusal.reason === "gpu_probe_failed") {
        return new ApiError(503, { detail: refusal.detail, reason: refusal.reason });
      }
      return new ApiError(409, { ...refusal }, { "Retry-After": VRAM_RETRY_AFTER_S });
    }
    case "busy": {
      const detail = result.unsupervised
        ? `processes of job ${result.activeId} are running but this worker does not supervise them ` +
          "(they are being stopped); no training starts until they are gone"
        : result.limit === undefined
          ? `another training is running (job ${result.activeId}); one job runs at a time`
          : `${result.limit} trainings are active (slurm.max_active_jobs), among them job ${result.activeId}`;
      const body = { detail, reason: "busy", active_job_id: result.activeId };
      return new ApiError(409, body, { "Retry-After": BUSY_RETRY_AFTER_S });
    }
    case "state_unwritable":
      return new ApiError(
        503,
        {
          detail: `${result.detail}; no training starts until the state dir takes writes again (see /healthz)`,
          reason: "state_unwritable",
        },
        { "Retry-After": BUSY_RETRY_AFTER_S },
      );
    case "insufficient_disk":
      return new ApiError(409, { reason: "insufficient_disk", ...result.shortfall });
    case "not_resumable":
      return new ApiError(409, { detail: result.detail, reason: "not_resumable" });
    case "base_model_changed":
      return new ApiError(409, { detail: result.detail, reason: "base_model_changed", field: "base_model_path" });
    case "no_such_job":
      return noSuchJob();
    case "slurm_refused":
      return new ApiError(503, {
        detail: `${result.detail}; check the [slurm] settings and the devices' gres (lora-worker doctor)`,
        reason: "slurm_refused",
      });
    case "smoke_unavailable":
      return new ApiError(409, { detail: result.detail, reason: "smoke_unavailable" });
  }
}
