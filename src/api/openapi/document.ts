import { z } from "zod";
import { TrainRequest } from "../../request/train-request.ts";
import { Conflict, Dispatched, Status, GpuStatus, Health, JobList, JobView, LossCurve, Problem, Unavailable, ValidationError } from "./schemas.ts";

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
          parameters: [
            { name: "status", in: "query", schema: schema(Status) },
            { name: "limit", in: "query", schema: { type: "integer", minimum: 1, maximum: 100, default: 20 } },
            { name: "cursor", in: "query", schema: { type: "string" } },
          ],
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
          parameters: [jobId, { name: "lines", in: "query", schema: { type: "integer", minimum: 1, maximum: 5000, default: 200 } }],
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
          parameters: [jobId, { name: "max_points", in: "query", schema: { type: "integer", minimum: 3, maximum: 10000, default: 500 } }],
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
