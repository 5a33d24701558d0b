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
