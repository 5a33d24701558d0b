import { closeSync, constants, createReadStream, fstatSync, openSync } from "node:fs";
import { Readable } from "node:stream";
import { Hono } from "hono";
import type { Dispatcher } from "../dispatch/dispatch.ts";
import type { JobStore } from "../store/job-store.ts";
import type { JobDirs } from "../job-dir/job-dir.ts";
import type { Supervisor } from "../supervisor/index.ts";
import { ApiError, noSuchJob, refusalError } from "./errors.ts";
import { createJobFeeds, jobEvents } from "./events.ts";
import { idempotencyKeyOf, readJsonBody, readOptionalJsonBody, sentWith } from "./body.ts";
import { CurveQuery, encodeCursor, JOB_ID, ListQuery, parseQuery } from "./query.ts";
import { logAnswer } from "./log-answer.ts";
import { type JobViews, jobView } from "./job-view.ts";
import { lossCurve } from "./loss-curve.ts";

const JSON_TYPE = { "content-type": "application/json" };

export interface TrainRouteDeps {
  store: JobStore;
  dispatcher: Dispatcher;
  supervisor: Supervisor;
  /** Where each job's log is. */
  dirs: JobDirs;
  /** Lifts the server's idle timeout for a request whose answer is bounded by its own deadline. */
  keepOpen?: (req: Request) => void;
  bodyDeadlineMs?: number;
}

export function trainRoutes(deps: TrainRouteDeps & { views: JobViews }) {
  const { store, dispatcher, supervisor, dirs, keepOpen, bodyDeadlineMs, views } = deps;
  // A job read through `read`, or 404 for an id that is not a job's.
  const known = <T>(id: string, read: (id: string) => T | null): T => {
    const found = JOB_ID.test(id) ? read(id) : null;
    if (found === null) throw noSuchJob();
    return found;
  };
  const viewOf = (id: string) => known(id, views.view);
  const jobOf = (id: string) => known(id, views.read).job;
  const feeds = createJobFeeds({ supervisor, answer: (id: string) => viewOf(id) });

  return new Hono()
    .post("/", async (c) => {
      const body = await readJsonBody(c.req.raw, bodyDeadlineMs);
      const { key, faults } = sentWith(idempotencyKeyOf(c.req.header("idempotency-key")), body);
      const result = await dispatcher.dispatch(body.value, key, faults);
      if (!result.ok) throw refusalError(result.error);
      return c.json({ worker_job_id: result.value.id, status: result.value.status });
    })
    .get("/", (c) => {
      const query = parseQuery(ListQuery, c.req);
      const listed = views.list(query.status ?? null, query.limit + 1, query.cursor ?? null);
      const page = listed.slice(0, query.limit);
      const last = page.at(-1)?.job;
      const next = listed.length > query.limit && last ? encodeCursor(last) : null;
      return c.json({ jobs: page.map(({ view }) => view), next_cursor: next });
    })
    .get("/:id", (c) => {
      return c.body(viewOf(c.req.param("id")).json, 200, JSON_TYPE);
    })
    .get("/:id/log", (c) => logAnswer(c, dirs.of(jobOf(c.req.param("id")).id).log))
    .get("/:id/events", (c) => {
      const job = jobOf(c.req.param("id"));
      keepOpen?.(c.req.raw); // a stream lives as long as its job; heartbeats keep it from looking idle
      return jobEvents(c, feeds, job.id);
    })
    // Only a file the record lists, by its exact name: nothing of the URL reaches a path. Opened without following
    // a link, and served only while it is the size that was verified.
    .get("/:id/samples/:name", (c) => {
      const row = jobOf(c.req.param("id"));
      // Only the preview images on record are ever served.
      const sample = row.samples.find((s) => s.name === c.req.param("name"));
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
      const row = jobOf(c.req.param("id"));
      const step = c.req.param("step");
      // Only the verified intermediate LoRAs on record are ever served.
      const checkpoint = row.checkpoints.find((k) => String(k.step) === step);
      if (!checkpoint) throw new ApiError(404, { detail: `job ${row.id} lists no checkpoint at step ${step}` });
      const body = openVerified(checkpoint.path, checkpoint.bytes);
      if (body === null) throw new ApiError(404, { detail: "the checkpoint is no longer in the job's run directory" });
      const name = `${row.request.output_name}-step${step}.safetensors`;
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
      const row = jobOf(c.req.param("id"));
      const { max_points } = parseQuery(CurveQuery, c.req);
      return c.json({ worker_job_id: row.id, ...lossCurve(store.lossHistory(row.id), max_points) });
    })
    .post("/:id/resume", async (c) => {
      const body = await readOptionalJsonBody(c.req.raw, bodyDeadlineMs);
      const { key, faults } = sentWith(idempotencyKeyOf(c.req.header("idempotency-key")), body);
      const id = c.req.param("id");
      if (!JOB_ID.test(id)) throw noSuchJob();
      const result = await dispatcher.resume(id, key, body.value, faults);
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
      const row = jobOf(c.req.param("id"));
      keepOpen?.(c.req.raw); // the answer waits for the run's next saved state (at most a tier's checkpoint interval)
      const final = await supervisor.pause(row.id);
      return c.json(jobView(final ?? row, null));
    })
    .post("/:id/cancel", async (c) => {
      const row = jobOf(c.req.param("id"));
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
