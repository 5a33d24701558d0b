import { z } from "zod";
import { retryAftersOf } from "../dispatch/refusal.ts";
import { READ_MAX_BYTES } from "../job-dir/log-cursor.ts";
import type { Component } from "./openapi-components.ts";
import { JOB_VIEW_EXAMPLE, LOG_CURSOR_HEADER, LOG_CUT_HEADER, TRAIN_REQUEST_EXAMPLE } from "./openapi.ts";
import { CurveQuery, ListQuery, LogQuery } from "./query.ts";

const schema = (s: z.ZodType) => {
  const { $schema: _, ...rest } = z.toJSONSchema(s, { io: "input", unrepresentable: "any" }) as Record<string, unknown>;
  return rest;
};
const json = (name: Component, example?: unknown) => ({
  "application/json": {
    schema: { $ref: `#/components/schemas/${name}` },
    ...(example === undefined ? {} : { example }),
  },
});
const answer = (description: string, name: Component, example?: unknown) => ({
  description,
  content: json(name, example),
});
const text = (description: string, type: string) => ({
  description,
  content: { [type]: { schema: { type: "string" } } },
});
const problem = (description: string) => answer(description, "Problem");
const jobId = { name: "id", in: "path", required: true, schema: { type: "string", format: "uuid" } };
const checkpointStep = {
  name: "step",
  in: "path",
  required: true,
  description: "a `step` of the job's `checkpoints`",
  schema: { type: "integer", minimum: 1 },
};
const sampleName = {
  name: "name",
  in: "path",
  required: true,
  description: "a `name` of the job's `samples`",
  schema: { type: "string" },
};
// zod writes a default first; a query parameter's schema lists it last, after the constraints it defaults within.
const queryParameters = (query: z.ZodObject) =>
  Object.entries(query.shape).map(([name, field]) => {
    const { default: fallback, ...rest } = schema(field as z.ZodType);
    return { name, in: "query", schema: fallback === undefined ? rest : { ...rest, default: fallback } };
  });
const idempotencyKey = {
  name: "Idempotency-Key",
  in: "header",
  description: "the same key with the same request answers the job it claimed; with another request, a 422 " +
    "(idempotency_mismatch). Remembered as long as the job's record",
  schema: { type: "string", minLength: 1, maxLength: 255, pattern: "^[\\x21-\\x7e]+$" },
};
const notFound = problem("no such job");
const late = problem("the body did not arrive in time");
const unauthorized = problem("missing or wrong bearer token");
const forbidden = problem("a read-only token (auth.read_token_file): it may read, never act");
// A refusal's Retry-After, as REFUSALS sends it with the reasons of this status.
const retryAfter = (status: 409 | 503) => {
  const sent = retryAftersOf(status).map(({ reason, seconds }) => `${reason} (${seconds} s)`).join(", ");
  return {
    "Retry-After": {
      description: `seconds to wait before sending the request again; sent with ${sent}, not with the other reasons`,
      schema: { type: "integer", minimum: 1 },
    },
  };
};
const refusal = (status: 409 | 503, description: string, name: "Conflict" | "Unavailable") => ({
  ...answer(description, name),
  headers: retryAfter(status),
});
// A job's own start failing is not a refusal: the job was claimed (200) and ends spawn_failed in its preparing phase.
const unavailable = refusal(
  503,
  "nvidia-smi could not be read (gpu_probe_failed), the state dir cannot take writes (state_unwritable), or Slurm " +
    "would not take the run (slurm_refused, Slurm backend)",
  "Unavailable",
);
const malformed = problem("malformed JSON or a body that is not UTF-8");
const tooLarge = problem("body too large or nested too deep");
const RESUME_EXAMPLE = { samples: 0 };
const SMOKE_EXAMPLE = { device_index: 1 };

// The paths, one constant each, in the order the document lists them.
const TRAIN = {
  get: {
    operationId: "listJobs",
    summary: "Recent jobs, newest first",
    parameters: queryParameters(ListQuery),
    responses: {
      200: answer("a page of jobs", "JobList"),
      401: unauthorized,
      422: answer("a bad query parameter", "ValidationError"),
    },
  },
  post: {
    operationId: "dispatchTrain",
    summary: "Dispatch a train",
    parameters: [idempotencyKey],
    requestBody: { required: true, content: json("TrainRequest", TRAIN_REQUEST_EXAMPLE) },
    responses: {
      200: answer("dispatched (or the same job again for a retried request)", "Dispatched"),
      400: malformed,
      401: unauthorized,
      403: forbidden,
      408: late,
      409: refusal(
        409,
        "busy, output exists, another active job publishes the same output (output_in_use), refused by VRAM " +
          "admission, or too little disk for the run's states and LoRAs",
        "Conflict",
      ),
      413: tooLarge,
      415: problem("not application/json"),
      422: answer(
        "every fault of the request at once, one item per field: its shape, its paths, its device, the dataset's " +
          "own checks, the Idempotency-Key",
        "ValidationError",
      ),
      503: unavailable,
    },
  },
};

const JOB = {
  get: {
    operationId: "getJob",
    summary: "One job",
    parameters: [jobId],
    responses: { 200: answer("the job", "JobView", JOB_VIEW_EXAMPLE), 401: unauthorized, 404: notFound },
  },
};

const JOB_LOG = {
  get: {
    operationId: "getJobLog",
    summary: "Tail of the run log, or what it gained since a cursor",
    description:
      "Without `after`: the last `lines` lines, a tqdm bar shown as its last redraw. With `after`: the log's " +
      `bytes since that cursor, as written (at most ${READ_MAX_BYTES / 1024 / 1024} MiB; ask again from the ` +
      "new cursor for more). Every answer's `x-log-cursor` is where the next read goes on from; a tail's " +
      "points at the start of its last line, which a bar may still be redrawing, so a follower shows that line " +
      "from the bytes. The worker cuts a log to its cap in place: a cursor from before a cut is carried " +
      "across it, never read as other bytes, and its answer says so with `x-log-cut`.",
    parameters: [jobId, ...queryParameters(LogQuery)],
    responses: {
      200: {
        ...text("the last lines, or the bytes since the cursor", "text/plain"),
        headers: {
          [LOG_CURSOR_HEADER]: {
            description: "the cursor to send as `after` next; absent when the log cannot be followed (a run an " +
              "older worker started, or a cut that has not finished)",
            schema: { type: "string" },
          },
          [LOG_CUT_HEADER]: {
            description: "`true` when the log was cut since the cursor sent: what the cut dropped is gone, and " +
              "the answer goes on from what it kept (its marker line says how much was dropped)",
            schema: { type: "string", enum: ["true"] },
          },
        },
      },
      401: unauthorized,
      404: notFound,
      422: answer(
        "bad lines, `after` that is not a cursor of this log, `after` with `lines`, or a log that keeps no " +
          "record of its cuts (a run an older worker started)",
        "ValidationError",
      ),
      503: problem("a cut of the log has not finished (its shim was stopped in it): no offset can be trusted"),
    },
  },
};

// /train/{id}/events: OpenAPI 3.1 has no place for the events of a text/event-stream; x-event-schema holds them.
const jobEvents = (event: unknown) => ({
  get: {
    operationId: "streamJobEvents",
    summary:
      "Server-Sent Events: `event: job` snapshots on change, then `event: end`; resumable with Last-Event-ID",
    parameters: [jobId, { name: "Last-Event-ID", in: "header", schema: { type: "string" } }],
    responses: {
      200: {
        description: "an event stream; each event, its `data:` line parsed as JSON, is as x-event-schema says",
        content: { "text/event-stream": { schema: { type: "string" }, "x-event-schema": event } },
      },
      204: {
        description:
          "Last-Event-ID is `end`, the end event's id, and the job is finished: nothing more will come, " +
          "so an EventSource stops reconnecting",
      },
      401: unauthorized,
      404: notFound,
    },
  },
});

const LOSS_CURVE = {
  get: {
    operationId: "getLossCurve",
    summary: "Loss curve, thinned to max_points",
    parameters: [jobId, ...queryParameters(CurveQuery)],
    responses: {
      200: answer("(step, loss) points", "LossCurve"),
      401: unauthorized,
      404: notFound,
      422: answer("bad max_points", "ValidationError"),
    },
  },
};

const SAMPLE = {
  get: {
    operationId: "getJobSample",
    summary: "One preview PNG the job's `samples` list",
    description: "Only a name the record lists is served; the file never changes, so it may be cached.",
    parameters: [jobId, sampleName],
    responses: {
      200: { description: "the PNG", content: { "image/png": { schema: { type: "string", format: "binary" } } } },
      401: unauthorized,
      404: problem("no such job, a name the job does not list, or a sample no longer in the run directory"),
    },
  },
};

const CHECKPOINT = {
  get: {
    operationId: "getJobCheckpoint",
    summary: "One intermediate LoRA the job's `checkpoints` list",
    description:
      "The run's intermediate LoRAs live in the worker's private run directory, not in output_dir; only a " +
      "step the record lists is served, as verified (`x-lora-sha256` is its digest).",
    parameters: [jobId, checkpointStep],
    responses: {
      200: {
        description: "the intermediate LoRA (safetensors)",
        content: { "application/octet-stream": { schema: { type: "string", format: "binary" } } },
      },
      401: unauthorized,
      404: problem("no such job, a step the job does not list, or a checkpoint no longer on disk"),
    },
  },
};

const PAUSE = {
  post: {
    operationId: "pauseJob",
    summary: "Stop right after the run's next saved state, to resume it later",
    description:
      "Answers once the run has ended, which can take a tier's checkpoint interval. " +
      "A job that ended first, or had already ended, is answered as it ended.",
    parameters: [jobId],
    responses: {
      200: answer(
        "the final job: `cancelled` with `paused` and its `resume_step`, or how it ended otherwise",
        "JobView",
      ),
      401: unauthorized,
      403: forbidden,
      404: notFound,
    },
  },
};

const RESUME = {
  post: {
    operationId: "resumeJob",
    summary: "A new job continuing a failed or cancelled one from its newest saved state",
    description: "Without a body the new run takes its predecessor's request whole; `samples` changes only its " +
      "preview images (0 after a failure while sampling).",
    parameters: [jobId, idempotencyKey],
    requestBody: { required: false, content: json("ResumeRequest", RESUME_EXAMPLE) },
    responses: {
      200: answer("the new job (or the same one again for a retried request)", "Resumed"),
      401: unauthorized,
      403: forbidden,
      404: notFound,
      409: refusal(
        409,
        "not_resumable (the detail says why), base_model_changed, busy, output exists or in use, refused by VRAM " +
          "or disk admission",
        "Conflict",
      ),
      400: malformed,
      408: late,
      413: tooLarge,
      415: problem("a body that is not application/json"),
      422: answer(
        "a bad body, the job's request no longer passes the checks (a base model or device gone), " +
          "or a bad or reused Idempotency-Key",
        "ValidationError",
      ),
      503: unavailable,
    },
  },
};

const CANCEL = {
  post: {
    operationId: "cancelJob",
    summary: "Stop the whole process tree",
    parameters: [jobId],
    responses: { 200: answer("the final job", "JobView"), 401: unauthorized, 403: forbidden, 404: notFound },
  },
};

const GPU_STATUS = {
  get: {
    operationId: "getGpuStatus",
    summary: "Devices, VRAM and processes",
    responses: {
      200: answer("this host's devices, or on the Slurm backend the cluster's nodes", "GpuStatus"),
      401: unauthorized,
      503: answer("nvidia-smi failed (on the Slurm backend, scontrol show node)", "Unavailable"),
    },
  },
};

const SMOKE = {
  post: {
    operationId: "dispatchSmoke",
    summary: "A smoke run: the fast recipe cut to 6 steps, on a dataset the worker writes (lora-worker smoke)",
    requestBody: { required: true, content: json("SmokeBody", SMOKE_EXAMPLE) },
    responses: {
      200: answer("dispatched: a job of tier smoke", "Dispatched"),
      400: malformed,
      401: unauthorized,
      403: forbidden,
      408: late,
      409: refusal(409, "busy, refused by VRAM admission, or no smoke.base_model configured", "Conflict"),
      413: tooLarge,
      415: problem("not application/json"),
      422: answer("a device_index that names no device, or none where several are configured", "ValidationError"),
      503: unavailable,
    },
  },
};

const DATASET_CHECK = {
  post: {
    operationId: "checkDataset",
    summary: "The dataset report a train request's job would get, without the job",
    description: "The body of POST /train, with its checks and 422s (identity_check \"refuse\" included): its " +
      "dataset is copied into a scratch folder of the state dir and prepared as a job's would be (captions, " +
      "upright images, token window, per-file notes, identity scored by the face model), then removed. No row, " +
      "no job directory, no GPU. One at a time: another while one runs is a 409 check_busy with Retry-After.",
    requestBody: { required: true, content: json("TrainRequest", TRAIN_REQUEST_EXAMPLE) },
    responses: {
      200: answer("the report, as a job's dataset.prepared", "DatasetCheck"),
      400: malformed,
      401: unauthorized,
      403: forbidden,
      408: late,
      409: refusal(409, "another dataset check is running (check_busy)", "Conflict"),
      413: tooLarge,
      415: problem("not application/json"),
      422: answer("every fault of the request at once, as POST /train answers them", "ValidationError"),
    },
  },
};

const HEALTHZ = {
  get: {
    operationId: "getHealth",
    summary: "Liveness and facts",
    security: [],
    responses: { 200: answer("alive", "Health") },
  },
};

const METRICS = {
  get: {
    operationId: "getPrometheusMetrics",
    summary: "Prometheus text format",
    responses: { 200: text("metrics", "text/plain"), 401: unauthorized },
  },
};

const OPENAPI = {
  get: {
    operationId: "getOpenApiDocument",
    summary: "This document",
    description: "Behind the token like every route but /healthz and /: `lora-worker openapi` prints the same " +
      "document with no server, config or token.",
    responses: {
      200: { description: "OpenAPI 3.1", content: { "application/json": { schema: { type: "object" } } } },
      401: unauthorized,
    },
  },
};

const STATUS_PAGE = {
  get: {
    operationId: "getStatusPage",
    summary: "Status page for a person",
    security: [],
    responses: { 200: text("HTML", "text/html") },
  },
};

/** The document's paths in the order it lists them; `event` is the event stream's schema (x-event-schema). */
export function openApiPaths(event: unknown) {
  return {
    "/train": TRAIN,
    "/train/{id}": JOB,
    "/train/{id}/log": JOB_LOG,
    "/train/{id}/events": jobEvents(event),
    "/train/{id}/metrics": LOSS_CURVE,
    "/train/{id}/samples/{name}": SAMPLE,
    "/train/{id}/checkpoints/{step}": CHECKPOINT,
    "/train/{id}/pause": PAUSE,
    "/train/{id}/resume": RESUME,
    "/train/{id}/cancel": CANCEL,
    "/gpu-status": GPU_STATUS,
    "/smoke": SMOKE,
    "/dataset/check": DATASET_CHECK,
    "/healthz": HEALTHZ,
    "/metrics": METRICS,
    "/openapi.json": OPENAPI,
    "/": STATUS_PAGE,
  };
}
