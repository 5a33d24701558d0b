import { Hono } from "hono";
import type { Dispatcher } from "../dispatch/dispatch.ts";
import type { JobStatus as Status } from "../job.ts";
import type { JobRow, JobStore } from "../store/job-store.ts";
import type { Supervisor } from "../supervisor/supervisor.ts";
import { tailLines } from "../supervisor/job-log.ts";
import { ApiError, noSuchJob } from "./api-error.ts";
import { idempotencyKeyOf, refusalError } from "./dispatch-answer.ts";
import { lossCurve } from "./downsample.ts";
import { Status as StatusSchema } from "./openapi/schemas.ts";
import { jobEvents } from "./job-events.ts";
import { jobView } from "./job-view.ts";
import { readJsonBody } from "./json-body.ts";

const JOB_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const DEFAULT_LOG_LINES = 200;
const MAX_LOG_LINES = 5000;
const DEFAULT_PAGE = 20;
const MAX_PAGE = 100;
const DEFAULT_CURVE_POINTS = 500;
const MAX_CURVE_POINTS = 10_000;
const STATUSES: readonly Status[] = StatusSchema.options;

export interface TrainRouteDeps {
  store: JobStore;
  dispatcher: Dispatcher;
  supervisor: Supervisor;
  /** Lifts the server's idle timeout for a request whose answer is bounded by its own deadline. */
  keepOpen?: (req: Request) => void;
  bodyDeadlineMs?: number;
}

export function trainRoutes({ store, dispatcher, supervisor, keepOpen, bodyDeadlineMs }: TrainRouteDeps) {
  const viewOf = (row: JobRow) => ({ row, view: jobView(row, supervisor.progress(row.id)) });
  const find = (id: string) => {
    const row = JOB_ID.test(id) ? store.get(id) : null;
    if (!row) throw noSuchJob();
    return row;
  };

  return new Hono()
    .post("/", async (c) => {
      const key = idempotencyKeyOf(c.req.header("idempotency-key"));
      const result = await dispatcher.dispatch(await readJsonBody(c.req.raw, bodyDeadlineMs), key);
      if (!result.ok) throw refusalError(result);
      return c.json({ worker_job_id: result.job.id, status: result.job.status });
    })
    .get("/", (c) => {
      const query = listQuery(c.req.query("status"), c.req.query("limit"), c.req.query("cursor"));
      const rows = store.list(query.status, query.limit + 1, query.after);
      const page = rows.slice(0, query.limit);
      const last = page.at(-1);
      const next = rows.length > query.limit && last ? encodeCursor(last) : null;
      return c.json({ jobs: page.map((row) => jobView(row, supervisor.progress(row.id))), next_cursor: next });
    })
    .get("/:id", (c) => {
      const row = find(c.req.param("id"));
      return c.json(jobView(row, supervisor.progress(row.id)));
    })
    .get("/:id/log", (c) => {
      const row = find(c.req.param("id"));
      const lines = parseLines(c.req.query("lines"));
      const tail = tailLines(row.log_path, lines);
      return c.text(tail.length > 0 ? `${tail.join("\n")}\n` : "");
    })
    .get("/:id/events", (c) => {
      const row = find(c.req.param("id"));
      keepOpen?.(c.req.raw); // a stream lives as long as its job; heartbeats keep it from looking idle
      return jobEvents(c, { supervisor, snapshot: () => viewOf(store.get(row.id)!) });
    })
    .get("/:id/metrics", (c) => {
      const row = find(c.req.param("id"));
      const max = boundedInt(c.req.query("max_points"), "max_points", DEFAULT_CURVE_POINTS, 3, MAX_CURVE_POINTS);
      return c.json({ worker_job_id: row.id, ...lossCurve(store.lossHistory(row.id), max) });
    })
    .post("/:id/cancel", async (c) => {
      const row = find(c.req.param("id"));
      keepOpen?.(c.req.raw); // the answer waits for the process group, up to the cancel grace and a SIGKILL
      const final = await supervisor.cancel(row.id);
      return c.json(jobView(final ?? row, null));
    });
}

function parseLines(raw: string | undefined): number {
  return boundedInt(raw, "lines", DEFAULT_LOG_LINES, 1, MAX_LOG_LINES);
}

function boundedInt(raw: string | undefined, name: string, fallback: number, min: number, max: number): number {
  if (raw === undefined) return fallback;
  const n = Number(raw);
  if (!/^\d+$/.test(raw) || n < min || n > max) throw queryError(name, `must be an integer from ${min} to ${max}`);
  return n;
}

function queryError(name: string, msg: string): ApiError {
  return new ApiError(422, { detail: [{ loc: ["query", name], msg, type: "value_error" }] });
}

function listQuery(status: string | undefined, limit: string | undefined, cursor: string | undefined) {
  if (status !== undefined && !STATUSES.includes(status as Status)) throw queryError("status", `must be one of ${STATUSES.join(", ")}`);
  return { status: (status ?? null) as Status | null, limit: boundedInt(limit, "limit", DEFAULT_PAGE, 1, MAX_PAGE), after: cursor === undefined ? null : decodeCursor(cursor) };
}

// The cursor is the last row's sort key, opaque to clients.
function encodeCursor(row: JobRow): string {
  return Buffer.from(JSON.stringify([row.created_at, row.id])).toString("base64url");
}

function decodeCursor(cursor: string): { createdAt: string; id: string } {
  try {
    const [createdAt, id] = JSON.parse(Buffer.from(cursor, "base64url").toString("utf8")) as unknown[];
    if (typeof createdAt === "string" && typeof id === "string" && JOB_ID.test(id)) return { createdAt, id };
  } catch {
    // falls through to the refusal
  }
  throw queryError("cursor", "is not a cursor this worker handed out");
}
