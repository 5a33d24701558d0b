import { z } from "zod";
import { SmokeBody } from "../dispatch/smoke.ts";
import { ErrorCode, JobStatus, Phase } from "../job.ts";
import { JobRequest, ResumeRequest, TrainRequest } from "../request/schema.ts";
import {
  CheckpointView, ClusterGpuStatus, Conflict, DatasetCheck, DatasetReportView, DetailItem, Dispatched, FileNoteView,
  GpuStatus,
  Health, HostGpuStatus, JobEvent, JobList, JobView, LossCurve, Problem, Resumed, SampleView, Unavailable,
  ValidationError,
} from "./openapi.ts";

// Named components: a generated client gets one type for each, and every use of one is a $ref to it.
const COMPONENTS = {
  JobStatus,
  Phase,
  ErrorCode,
  TrainRequest,
  JobRequest,
  ResumeRequest,
  SmokeBody,
  Checkpoint: CheckpointView,
  Sample: SampleView,
  DatasetReport: DatasetReportView,
  FileNote: FileNoteView,
  JobView,
  JobList,
  Dispatched,
  DatasetCheck,
  Resumed,
  LossCurve,
  DetailItem,
  ValidationError,
  Conflict,
  Unavailable,
  Problem,
  GpuStatus,
  HostGpuStatus,
  ClusterGpuStatus,
  Health,
};
/** A named component of the document: each use of one is a $ref to it. */
export type Component = keyof typeof COMPONENTS;

/**
 * The components as JSON Schema, and JobEvent's apart. zod stamps each with $schema and an $id of its own ref; inside
 * an OpenAPI document both are noise. JobEvent is drawn with them, so its records are $refs to JobView, but stands in
 * the event stream's x-event-schema: OpenAPI 3.1 has no place for the events of a text/event-stream, and a component
 * no Schema Object references is one a linter reports unused.
 */
export function componentSchemas() {
  const registry = z.registry<{ id: string }>();
  for (const [id, s] of Object.entries({ ...COMPONENTS, JobEvent })) registry.add(s, { id });
  const { schemas } = z.toJSONSchema(registry, {
    io: "input",
    unrepresentable: "any",
    uri: (id) => `#/components/schemas/${id}`,
  });
  const { JobEvent: event, ...components } = Object.fromEntries(
    Object.entries(schemas).map(([id, { $schema: _, $id: __, ...rest }]) => [id, rest]),
  );
  return { components, event };
}
