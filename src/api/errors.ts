import { answerRefusal, type DispatchRefusal, NO_SUCH_JOB } from "../dispatch/refusal.ts";

// The one error type that becomes an HTTP answer; everything else is a logged 500.
export class ApiError extends Error {
  constructor(
    readonly status: 400 | 401 | 403 | 404 | 405 | 408 | 409 | 413 | 415 | 422 | 503,
    readonly body: Record<string, unknown>,
    readonly headers: Record<string, string> = {},
  ) {
    super(typeof body.detail === "string" ? body.detail : `HTTP ${status}`);
  }
}

export const noSuchJob = () => new ApiError(404, { detail: NO_SUCH_JOB });

// Every refusal of POST /train becomes its SPEC §3 answer here, as dispatch/refusal.ts's table says; the route only
// handles success.
export function refusalError(refusal: DispatchRefusal): ApiError {
  const { status, body, retryAfterS } = answerRefusal(refusal);
  return new ApiError(status, body, retryAfterS === undefined ? {} : { "Retry-After": String(retryAfterS) });
}
