import { closeSync, constants, createReadStream, fstatSync, openSync } from "node:fs";
import { Readable } from "node:stream";
import { Hono } from "hono";
import type { Dispatcher } from "../dispatch/dispatch.ts";
import type { JobRow, JobStore } from "../store/job-store.ts";
import type { LiveProgress, Supervisor } from "../supervisor/supervisor.ts";
import { ApiError, noSuchJob, refusalError } from "./errors.ts";
import { createJobFeeds, jobEvents } from "./events.ts";
import { idempotencyKeyOf, readJsonBody, readOptionalJsonBody } from "./body.ts";
import { CurveQuery, encodeCursor, JOB_ID, ListQuery, parseQuery } from "./query.ts";
import { logAnswer } from "./log-answer.ts";
import { checkpointsOf, jobView, samplesOf } from "./job-view.ts";
import { lossCurve } from "./loss-curve.ts";
import { JobRequest } from "../request/schema.ts";

const JSON_TYPE = { "content-type": "application/json" };

export interface TrainRouteDeps {
  store: JobStore;
  dispatcher: Dispatcher;
  supervisor: Supervisor;
  /** Lifts the server's idle timeout for a request whose answer is bounded by its own deadline. */
  keepOpen?: (req: Request) => void;
  bodyDeadlineMs?: number;
}

export function trainRoutes({ store, dispatcher, supervisor, keepOpen, bodyDeadlineMs }: TrainRouteDeps) {
  // A job's answer is serialised once per change of its record or its live progress (both are kept as the same
  // objects until they change), however many clients poll it or stream it.
  const answers = new WeakMap<JobRow, { live: LiveProgress | null; json: string }>();
  const answerOf = (row: JobRow): string => {
    const live = supervisor.progress(row.id);
    const known = answers.get(row);
    if (known && known.live === live) return known.json;
    const json = JSON.stringify(jobView(row, live));
    answers.set(row, { live, json });
    return json;
  };
  // A stream's first event follows findCurrent()'s read; each later one follows a change the supervisor read itself.
  const feeds = createJobFeeds({ supervisor, answer: (id: string) => {
    const row = store.get(id)!;
    return { row, json: answerOf(row) };
  } });
  const find = (id: string) => {
    const row = JOB_ID.test(id) ? store.get(id) : null;
    if (!row) throw noSuchJob();
    return row;
  };
  // For an answer about the job's progress: what its trainer wrote up to now is taken in first, so the record and
  // the live progress agree.
  const findCurrent = (id: string) => {
    supervisor.refresh(id);
    return find(id);
  };

  return new Hono()
    .post("/", async (c) => {
      const key = idempotencyKeyOf(c.req.header("idempotency-key"));
      const result = await dispatcher.dispatch(await readJsonBody(c.req.raw, bodyDeadlineMs), key);
      if (!result.ok) throw refusalError(result.error);
      return c.json({ worker_job_id: result.value.id, status: result.value.status });
    })
    .get("/", (c) => {
      const query = parseQuery(ListQuery, c.req);
      supervisor.refresh();
      const rows = store.list(query.status ?? null, query.limit + 1, query.cursor ?? null);
      const page = rows.slice(0, query.limit);
      const last = page.at(-1);
      const next = rows.length > query.limit && last ? encodeCursor(last) : null;
      return c.json({ jobs: page.map((row) => jobView(row, supervisor.progress(row.id))), next_cursor: next });
    })
    .get("/:id", (c) => {
      const row = findCurrent(c.req.param("id"));
      return c.body(answerOf(row), 200, JSON_TYPE);
    })
    .get("/:id/log", (c) => logAnswer(c, find(c.req.param("id"))))
    .get("/:id/events", (c) => {
      const row = findCurrent(c.req.param("id"));
      keepOpen?.(c.req.raw); // a stream lives as long as its job; heartbeats keep it from looking idle
      return jobEvents(c, feeds, row.id);
    })
    // Only a file the record lists, by its exact name: nothing of the URL reaches a path. Opened without following
    // a link, and served only while it is the size that was verified.
    .get("/:id/samples/:name", (c) => {
      const row = find(c.req.param("id"));
      const sample = samplesOf(row).find((s) => s.name === c.req.param("name"));
      if (!sample) throw new ApiError(404, { detail: "no such sample" });
      const body = openVerified(sample.path, sample.bytes);
      if (body === null) throw new ApiError(404, { detail: "the sample is no longer in the job's run directory" });
      return new Response(body, {
        headers: {
          "content-type": "image/png",
          "x-content-type-options": "nosniff",
          "cache-control": "private, max-age=86400, immutable",
        },
      });
    })
    // An intermediate LoRA the record lists, by its step: they live in the job's run directory, out of arbo's reach.
    .get("/:id/checkpoints/:step", (c) => {
      const row = find(c.req.param("id"));
      const step = c.req.param("step");
      const checkpoint = checkpointsOf(row).find((k) => String(k.step) === step);
      if (!checkpoint) throw new ApiError(404, { detail: `job ${row.id} lists no checkpoint at step ${step}` });
      const body = openVerified(checkpoint.path, checkpoint.bytes);
      if (body === null) throw new ApiError(404, { detail: "the checkpoint is no longer in the job's run directory" });
      const name = `${JobRequest.parse(JSON.parse(row.request)).output_name}-step${step}.safetensors`;
      return new Response(body, {
        headers: {
          "content-type": "application/octet-stream",
          "content-disposition": `attachment; filename="${name}"`,
          "x-lora-sha256": checkpoint.sha256,
          "cache-control": "private, max-age=86400, immutable",
        },
      });
    })
    .get("/:id/metrics", (c) => {
      const row = findCurrent(c.req.param("id"));
      const { max_points } = parseQuery(CurveQuery, c.req);
      return c.json({ worker_job_id: row.id, ...lossCurve(store.lossHistory(row.id), max_points) });
    })
    .post("/:id/resume", async (c) => {
      const key = idempotencyKeyOf(c.req.header("idempotency-key"));
      const id = c.req.param("id");
      if (!JOB_ID.test(id)) throw noSuchJob();
      const result = await dispatcher.resume(id, key, await readOptionalJsonBody(c.req.raw, bodyDeadlineMs));
      if (!result.ok) throw refusalError(result.error);
      const job = result.value;
      return c.json({
        worker_job_id: job.id,
        status: job.status,
        resumed_from: job.resumed_from,
        resume_step: job.resumed_from_step,
      });
    })
    .post("/:id/pause", async (c) => {
      const row = find(c.req.param("id"));
      keepOpen?.(c.req.raw); // the answer waits for the run's next saved state (at most a tier's checkpoint interval)
      const final = await supervisor.pause(row.id);
      return c.json(jobView(final ?? row, null));
    })
    .post("/:id/cancel", async (c) => {
      const row = find(c.req.param("id"));
      keepOpen?.(c.req.raw); // the answer waits for the process group, up to the cancel grace and a SIGKILL
      const final = await supervisor.cancel(row.id);
      return c.json(jobView(final ?? row, null));
    });
}

// A stream of the regular file at `path` (a link is not followed) while it holds `bytes`; null when it does not.
function openVerified(path: string, bytes: number): ReadableStream | null {
  let fd: number;
  try {
    fd = openSync(path, constants.O_RDONLY | constants.O_NOFOLLOW);
  } catch {
    return null;
  }
  const info = fstatSync(fd);
  if (!info.isFile() || info.size !== bytes) {
    closeSync(fd);
    return null;
  }
  return Readable.toWeb(createReadStream("", { fd, autoClose: true })) as ReadableStream;
}
