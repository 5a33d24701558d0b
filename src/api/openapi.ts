import { z } from "zod";
import { ErrorCode, JobStatus as Status, Phase } from "../job.ts";
import { TrainRequest } from "../request/schema.ts";
import { CurveQuery, ListQuery, LogQuery } from "./queries.ts";

// Response shapes, in zod so the OpenAPI document and the tests that check real answers share them.
export { JobStatus as Status } from "../job.ts";

export const JobView = z.strictObject({
  worker_job_id: z.uuid(),
  status: Status,
  phase: Phase,
  step: z.int().min(0),
  total_steps: z.int().min(0).nullable(),
  loss: z.number().nullable(),
  eta_s: z.number().nullable(),
  lora_path: z.string().optional(),
  lora_sha256: z.string().regex(/^[0-9a-f]{64}$/).optional(),
  lora_bytes: z.int().optional(),
  error: z.string().optional(),
  error_code: ErrorCode.optional(),
  created_at: z.iso.datetime(),
  started_at: z.iso.datetime().optional(),
  ended_at: z.iso.datetime().optional(),
  simulated: z.boolean(),
  exit_code: z.int().optional(),
  signal: z.string().optional(),
  admission_warning: z.string().optional(),
  /** The private copy of the dataset the trainer read: two runs with the same sha256 trained on the same files. */
  dataset: z.strictObject({ files: z.int().min(1), bytes: z.int().min(0), sha256: z.string().regex(/^[0-9a-f]{64}$/) }).optional(),
  forced_kill: z.boolean(),
  request: z.record(z.string(), z.unknown()),
});

export const Dispatched = z.strictObject({ worker_job_id: z.uuid(), status: Status });
export const JobList = z.strictObject({ jobs: z.array(JobView), next_cursor: z.string().nullable() });
export const LossCurve = z.strictObject({
  worker_job_id: z.uuid(),
  points: z.array(z.tuple([z.int(), z.number()])),
  total_points: z.int(),
  nan_points: z.int(),
});

export const ValidationError = z.strictObject({
  detail: z.array(z.strictObject({ loc: z.array(z.union([z.string(), z.int()])), msg: z.string(), type: z.string() })),
});
export const Conflict = z.looseObject({
  detail: z.string(),
  reason: z.enum(["busy", "output_exists", "insufficient_vram", "cotenant_active"]),
  active_job_id: z.uuid().optional(),
  free_mib: z.int().optional(),
  needed_mib: z.int().optional(),
});
export const Unavailable = z.strictObject({
  detail: z.string(),
  reason: z.enum(["gpu_probe_failed", "state_unwritable", "spawn_failed"]),
  worker_job_id: z.uuid().optional(),
});
export const Problem = z.strictObject({ detail: z.string() });

const GpuProcess = z.strictObject({ pid: z.int(), name: z.string(), used_mib: z.int().nullable(), role: z.enum(["training", "cotenant", "other"]) });
const Cotenant = z.strictObject({ device_index: z.int(), pid: z.int(), name: z.string(), used_mib: z.int().nullable() });
export const GpuStatus = z.strictObject({
  devices: z.array(
    z.strictObject({
      index: z.int(),
      name: z.string(),
      uuid: z.string(),
      memory_total_mib: z.int().nullable(),
      memory_used_mib: z.int().nullable(),
      memory_free_mib: z.int().nullable(),
      utilization_pct: z.number().nullable(),
      processes: z.array(GpuProcess),
    }),
  ),
  cotenants: z.array(Cotenant),
  tts_on_3090: z.boolean(),
});

export const Health = z.looseObject({
  status: z.literal("ok"),
  version: z.string(),
  active_job_id: z.uuid().nullable(),
  trainer_mode: z.enum(["real", "simulate"]),
  simulated: z.boolean(),
  auth_mode: z.string(),
});

export const TRAIN_REQUEST_EXAMPLE = {
  dataset_dir: "/worktank/arbo/train/t-123/dataset",
  base_model_path: "/worktank/models/sdxl-base-1.0.safetensors",
  output_dir: "/worktank/arbo/train/t-123/out",
  output_name: "ohwx_person",
  trigger: "ohwx",
  subject_class: "person",
  repeats: 10,
  tier: "balanced",
  device_index: 1,
  seed: 1234,
};

export const JOB_VIEW_EXAMPLE = {
  worker_job_id: "3f1c2a4e-5b6d-4e7f-8a9b-0c1d2e3f4a5b",
  status: "training",
  phase: "training",
  step: 640,
  total_steps: 1500,
  loss: 0.0871,
  eta_s: 1290,
  created_at: "2026-11-30T10:00:00.000Z",
  started_at: "2026-11-30T10:00:00.120Z",
  simulated: false,
  forced_kill: false,
  request: TRAIN_REQUEST_EXAMPLE,
};

const schema = (s: z.ZodType) => {
  const { $schema: _, ...rest } = z.toJSONSchema(s, { io: "input", unrepresentable: "any" }) as Record<string, unknown>;
  return rest;
};
const json = (s: z.ZodType, example?: unknown) => ({ "application/json": { schema: schema(s), ...(example === undefined ? {} : { example }) } });
const answer = (description: string, s: z.ZodType, example?: unknown) => ({ description, content: json(s, example) });
const problem = (description: string) => answer(description, Problem);
const jobId = { name: "id", in: "path", required: true, schema: { type: "string", format: "uuid" } };
// zod writes a default first; the document has always listed it last.
const queryParameters = (query: z.ZodObject) =>
  Object.entries(query.shape).map(([name, field]) => {
    const { default: fallback, ...rest } = schema(field as z.ZodType);
    return { name, in: "query", schema: fallback === undefined ? rest : { ...rest, default: fallback } };
  });
const notFound = problem("no such job");
const unauthorized = problem("missing or wrong bearer token");

// OpenAPI 3.1 uses JSON Schema 2020-12, which is what zod 4 emits.
export function openApiDocument(version: string) {
  return {
    openapi: "3.1.0",
    info: { title: "lora-worker", version, description: "SDXL LoRA training (kohya-ss sd-scripts) on demand." },
    components: { securitySchemes: { bearer: { type: "http", scheme: "bearer" } } },
    security: [{ bearer: [] }],
    paths: {
      "/train": {
        get: {
          summary: "Recent jobs, newest first",
          parameters: queryParameters(ListQuery),
          responses: { 200: answer("a page of jobs", JobList), 401: unauthorized, 422: answer("a bad query parameter", ValidationError) },
        },
        post: {
          summary: "Dispatch a train",
          parameters: [{ name: "Idempotency-Key", in: "header", schema: { type: "string", maxLength: 255 } }],
          requestBody: { required: true, content: json(TrainRequest, TRAIN_REQUEST_EXAMPLE) },
          responses: {
            200: answer("dispatched (or the same job again for a retried request)", Dispatched),
            400: problem("malformed JSON or a body that is not UTF-8"),
            401: unauthorized,
            408: problem("the body did not arrive in time"),
            409: answer("busy, output exists, or refused by VRAM admission", Conflict),
            413: problem("body too large or nested too deep"),
            415: problem("not application/json"),
            422: answer("invalid parameters", ValidationError),
            503: answer("nvidia-smi could not be read, the state dir cannot take writes, or the trainer could not be started (the failed job is named)", Unavailable),
          },
        },
      },
      "/train/{id}": { get: { summary: "One job", parameters: [jobId], responses: { 200: answer("the job", JobView, JOB_VIEW_EXAMPLE), 401: unauthorized, 404: notFound } } },
      "/train/{id}/log": {
        get: {
          summary: "Tail of the run log",
          parameters: [jobId, ...queryParameters(LogQuery)],
          responses: { 200: { description: "the last lines", content: { "text/plain": { schema: { type: "string" } } } }, 401: unauthorized, 404: notFound, 422: answer("bad lines", ValidationError) },
        },
      },
      "/train/{id}/events": {
        get: {
          summary: "Server-Sent Events: `event: job` snapshots on change, then `event: end`; resumable with Last-Event-ID",
          parameters: [jobId, { name: "Last-Event-ID", in: "header", schema: { type: "string" } }],
          responses: { 200: { description: "an event stream", content: { "text/event-stream": { schema: { type: "string" } } } }, 401: unauthorized, 404: notFound },
        },
      },
      "/train/{id}/metrics": {
        get: {
          summary: "Loss curve, thinned to max_points",
          parameters: [jobId, ...queryParameters(CurveQuery)],
          responses: { 200: answer("(step, loss) points", LossCurve), 401: unauthorized, 404: notFound, 422: answer("bad max_points", ValidationError) },
        },
      },
      "/train/{id}/cancel": { post: { summary: "Stop the whole process tree", parameters: [jobId], responses: { 200: answer("the final job", JobView), 401: unauthorized, 404: notFound } } },
      "/gpu-status": { get: { summary: "Devices, VRAM and processes", responses: { 200: answer("per device", GpuStatus), 401: unauthorized, 503: answer("nvidia-smi failed", Unavailable) } } },
      "/healthz": { get: { summary: "Liveness and facts", security: [], responses: { 200: answer("alive", Health) } } },
      "/metrics": { get: { summary: "Prometheus text format", responses: { 200: { description: "metrics", content: { "text/plain": { schema: { type: "string" } } } }, 401: unauthorized } } },
      "/openapi.json": { get: { summary: "This document", responses: { 200: { description: "OpenAPI 3.1", content: { "application/json": { schema: { type: "object" } } } }, 401: unauthorized } } },
      "/": { get: { summary: "Status page for a person", security: [], responses: { 200: { description: "HTML", content: { "text/html": { schema: { type: "string" } } } } } } },
    },
  };
}
