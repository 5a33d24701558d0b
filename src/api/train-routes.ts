import { Hono } from "hono";
import type { JobStore } from "../store/job-store.ts";
import type { Supervisor } from "../supervisor/supervisor.ts";
import { tailLines } from "../supervisor/log-tail.ts";
import { ApiError, noSuchJob } from "./api-error.ts";
import { idempotencyKeyOf, refusalError } from "./dispatch-answer.ts";
import { jobView } from "./job-view.ts";
import { readJsonBody } from "./json-body.ts";

const JOB_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const DEFAULT_LOG_LINES = 200;
const MAX_LOG_LINES = 5000;

export interface TrainRouteDeps {
  store: JobStore;
  supervisor: Supervisor;
  /** Lifts the server's idle timeout for a request whose answer is bounded by its own deadline. */
  keepOpen?: (req: Request) => void;
  bodyDeadlineMs?: number;
}

export function trainRoutes({ store, supervisor, keepOpen, bodyDeadlineMs }: TrainRouteDeps) {
  const find = (id: string) => {
    const row = JOB_ID.test(id) ? store.get(id) : null;
    if (!row) throw noSuchJob();
    return row;
  };

  return new Hono()
    .post("/", async (c) => {
      const key = idempotencyKeyOf(c.req.header("idempotency-key"));
      const result = await supervisor.dispatch(await readJsonBody(c.req.raw, bodyDeadlineMs), key);
      if (!result.ok) throw refusalError(result);
      return c.json({ worker_job_id: result.job.id, status: result.job.status });
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
    .post("/:id/cancel", async (c) => {
      const row = find(c.req.param("id"));
      keepOpen?.(c.req.raw); // the answer waits for the process group, up to the cancel grace and a SIGKILL
      const final = await supervisor.cancel(row.id);
      return c.json(jobView(final ?? row, null));
    });
}

function parseLines(raw: string | undefined): number {
  if (raw === undefined) return DEFAULT_LOG_LINES;
  const n = Number(raw);
  if (!/^\d+$/.test(raw) || n < 1 || n > MAX_LOG_LINES) {
    throw new ApiError(422, { detail: [{ loc: ["query", "lines"], msg: `must be an integer from 1 to ${MAX_LOG_LINES}`, type: "value_error" }] });
  }
  return n;
}
