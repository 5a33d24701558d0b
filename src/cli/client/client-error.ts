import { EXIT, type ExitCode } from "./exit-codes.ts";

export type ClientErrorKind = "unreachable" | "refused" | "no_such_job";

const EXIT_OF: Record<ClientErrorKind, ExitCode> = {
  unreachable: EXIT.unreachable,
  refused: EXIT.refused,
  no_such_job: EXIT.noSuchJob,
};

/** The one error a client command ends with; the entry point prints it and exits with its code. */
export class ClientError extends Error {
  constructor(
    readonly kind: ClientErrorKind,
    message: string,
  ) {
    super(message);
  }

  get exitCode(): ExitCode {
    return EXIT_OF[this.kind];
  }
}

interface DetailItem {
  loc?: unknown[];
  msg?: unknown;
}

// `detail` is a sentence, or FastAPI's list of {loc, msg}; `reason` and `active_job_id` add what a retry needs.
export function describeRefusal(status: number, body: unknown): string {
  const b = (typeof body === "object" && body !== null ? body : {}) as { detail?: unknown; reason?: unknown; active_job_id?: unknown };
  const detail = Array.isArray(b.detail)
    ? (b.detail as DetailItem[]).map((d) => `\n  ${(d.loc ?? []).join(".")}: ${String(d.msg)}`).join("")
    : typeof b.detail === "string" ? ` ${b.detail}` : "";
  const reason = typeof b.reason === "string" ? ` (reason: ${b.reason}${typeof b.active_job_id === "string" ? `, active job ${b.active_job_id}` : ""})` : "";
  const hint = status === 401 ? "\n  pass the worker's token: --token, LORA_WORKER_TOKEN, or --config with the worker's config file" : "";
  return `the worker answered ${status}:${detail || " (no detail)"}${reason}${hint}`;
}
