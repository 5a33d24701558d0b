import type { z } from "zod";
import type * as S from "../../api/openapi.ts";
import { LOG_CURSOR_HEADER, LOG_CUT_HEADER } from "../../api/openapi.ts";
import { isActive, type JobStatus } from "../../job.ts";
import { ClientError } from "./exit.ts";

// The worker's answers as the client reads them: the same zod schemas the OpenAPI document is built from.
export type JobView = z.infer<typeof S.JobView>;
type JobPage = z.infer<typeof S.JobList>;
export type Dispatched = z.infer<typeof S.Dispatched>;
export type Resumed = z.infer<typeof S.Resumed>;
export type GpuStatus = z.infer<typeof S.GpuStatus>;
export type HostGpuStatus = z.infer<typeof S.HostGpuStatus>;
export type ClusterGpuStatus = z.infer<typeof S.ClusterGpuStatus>;
export type GpuDeviceView = HostGpuStatus["devices"][number];
export type GpuProcessView = GpuDeviceView["processes"][number];
export type Health = z.infer<typeof S.Health>;

export function isTerminal(status: JobStatus): boolean {
  return !isActive(status);
}

// A 422 item as an unknown body may hold it.
interface AnswerItem {
  loc?: unknown[];
  msg?: unknown;
}

// `detail` is a sentence, or FastAPI's list of {loc, msg}; `reason` and `active_job_id` add what a retry needs.
function describeRefusal(status: number, body: unknown): string {
  type Answer = { detail?: unknown; reason?: unknown; active_job_id?: unknown };
  const b = (typeof body === "object" && body !== null ? body : {}) as Answer;
  const detail = Array.isArray(b.detail)
    ? (b.detail as AnswerItem[]).map((d) => `\n  ${(d.loc ?? []).join(".")}: ${String(d.msg)}`).join("")
    : typeof b.detail === "string" ? ` ${b.detail}` : "";
  const active = typeof b.active_job_id === "string" ? `, active job ${b.active_job_id}` : "";
  const reason = typeof b.reason === "string" ? ` (reason: ${b.reason}${active})` : "";
  const hint = status === 401
    ? "\n  pass the worker's token: --token, LORA_WORKER_TOKEN, or --config with the worker's config file"
    : "";
  return `the worker answered ${status}:${detail || " (no detail)"}${reason}${hint}`;
}

const REQUEST_TIMEOUT_MS = 30_000;
// Cancel answers once no process of the job is left: up to trainer.cancel_grace_seconds (max 600) and a SIGKILL.
const CANCEL_TIMEOUT_MS = 660_000;
// Pause answers once the run stopped after its next saved state: a checkpoint interval (about 5 minutes by design),
// the save, then a cancel's stop; a run stuck before its state is ended by the stall watchdog (default 15 minutes).
const PAUSE_TIMEOUT_MS = 30 * 60_000;

/** An answer of GET /train/{id}/log: its text, the cursor to read on from (none from an older worker), a cut since. */
export interface LogAnswer {
  text: string;
  cursor: string | null;
  cut: boolean;
}

interface JobQuery {
  status?: string;
  limit: number;
  cursor?: string;
}

export interface WorkerClient {
  url: string;
  submit(body: string, idempotencyKey?: string): Promise<Dispatched>;
  job(id: string): Promise<JobView>;
  jobs(query: JobQuery): Promise<JobPage>;
  log(id: string, lines?: number): Promise<LogAnswer>;
  /** What the log gained since `cursor` (an earlier answer's). */
  logAfter(id: string, cursor: string): Promise<LogAnswer>;
  cancel(id: string): Promise<JobView>;
  pause(id: string): Promise<JobView>;
  /** `samples`: the new run's previews, else its predecessor's. */
  resume(id: string, samples?: number): Promise<Resumed>;
  smoke(body: string): Promise<Dispatched>;
  /** The bytes of a preview image the job's record lists, by its URL path. */
  sample(url: string): Promise<Uint8Array>;
  gpu(): Promise<GpuStatus>;
  health(): Promise<Health>;
  /** The open event stream; the caller reads and closes it (abort `signal`). */
  events(id: string, lastEventId: string | null, signal: AbortSignal): Promise<Response>;
}

// Which worker a client talks to, and the bearer token it sends (null: none).
export interface Address {
  url: string;
  token: string | null;
}

interface Call {
  method?: "GET" | "POST";
  headers?: Record<string, string>;
  body?: string;
  // null: no deadline (an event stream stays open as long as the job runs).
  timeoutMs?: number | null;
  signal?: AbortSignal;
}

export function createWorkerClient(address: Address): WorkerClient {
  const auth: Record<string, string> = address.token === null ? {} : { authorization: `Bearer ${address.token}` };

  async function call(path: string, c: Call = {}): Promise<Response> {
    const deadline = c.timeoutMs === null ? null : AbortSignal.timeout(c.timeoutMs ?? REQUEST_TIMEOUT_MS);
    const signals = [deadline, c.signal ?? null];
    let res: Response;
    try {
      res = await fetch(address.url + path, {
        method: c.method ?? "GET",
        headers: { ...auth, ...c.headers },
        body: c.body,
        signal: AbortSignal.any(signals.filter((s) => s !== null)),
        redirect: "error",
      });
    } catch (err) {
      if (c.signal?.aborted) throw err;
      throw unreachable(address.url, err);
    }
    if (!res.ok) throw await refusal(res, path);
    return res;
  }

  const json = async <T>(path: string, c?: Call): Promise<T> => {
    const res = await call(path, c);
    try {
      return (await res.json()) as T;
    } catch (err) {
      throw unreachable(address.url, err);
    }
  };
  const job = (id: string) => `/train/${encodeURIComponent(id)}`;
  const logAnswer = async (path: string): Promise<LogAnswer> => {
    const res = await call(path);
    const answer = { cursor: res.headers.get(LOG_CURSOR_HEADER), cut: res.headers.get(LOG_CUT_HEADER) === "true" };
    try {
      return { text: await res.text(), ...answer };
    } catch (err) {
      throw unreachable(address.url, err);
    }
  };

  return {
    url: address.url,
    submit: (body, key) =>
      json("/train", {
        method: "POST",
        body,
        headers: { "content-type": "application/json", ...(key === undefined ? {} : { "idempotency-key": key }) },
      }),
    job: (id) => json(job(id)),
    jobs: ({ status, limit, cursor }) => {
      const query = { ...(status ? { status } : {}), limit: String(limit), ...(cursor ? { cursor } : {}) };
      return json(`/train?${new URLSearchParams(query)}`);
    },
    log: (id, lines) => logAnswer(`${job(id)}/log${lines === undefined ? "" : `?lines=${lines}`}`),
    logAfter: (id, cursor) => logAnswer(`${job(id)}/log?${new URLSearchParams({ after: cursor })}`),
    cancel: (id) => json(`${job(id)}/cancel`, { method: "POST", timeoutMs: CANCEL_TIMEOUT_MS }),
    pause: (id) => json(`${job(id)}/pause`, { method: "POST", timeoutMs: PAUSE_TIMEOUT_MS }),
    resume: (id, samples) =>
      json(`${job(id)}/resume`, {
        method: "POST",
        ...(samples === undefined
          ? {}
          : { body: JSON.stringify({ samples }), headers: { "content-type": "application/json" } }),
      }),
    smoke: (body) => json("/smoke", { method: "POST", body, headers: { "content-type": "application/json" } }),
    sample: async (url) => new Uint8Array(await (await call(url)).arrayBuffer()),
    gpu: () => json("/gpu-status"),
    health: () => json("/healthz"),
    events: (id, lastEventId, signal) =>
      call(`${job(id)}/events`, {
        signal,
        timeoutMs: null,
        headers: { accept: "text/event-stream", ...(lastEventId === null ? {} : { "last-event-id": lastEventId }) },
      }),
  };
}

function unreachable(url: string, err: unknown): ClientError {
  const e = err as { name?: string; code?: string; message?: string };
  const why = e.name === "TimeoutError" ? "no answer in time" : (e.code ?? e.message ?? String(err));
  return new ClientError("unreachable", `cannot reach the worker at ${url} (${why})`);
}

async function refusal(res: Response, path: string): Promise<ClientError> {
  const body: unknown = await res.json().catch(() => null);
  // A 404 from a job route means the job; from anywhere else, a route this worker does not have.
  if (res.status === 404 && path.startsWith("/train/")) {
    return new ClientError("no_such_job", `no such job: ${decodeURIComponent(path.split("/")[2]!)}`);
  }
  return new ClientError("refused", describeRefusal(res.status, body));
}
