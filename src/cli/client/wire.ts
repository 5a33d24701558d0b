import type { z } from "zod";
import type * as S from "../../api/openapi.ts";
import { isActive } from "../../job.ts";

// The worker's answers as the client reads them: the same zod schemas the OpenAPI document is built from.
export type JobStatus = z.infer<typeof S.Status>;
export type JobView = z.infer<typeof S.JobView>;
export type JobPage = z.infer<typeof S.JobList>;
export type Dispatched = z.infer<typeof S.Dispatched>;
export type GpuStatus = z.infer<typeof S.GpuStatus>;
export type GpuDeviceView = GpuStatus["devices"][number];
export type GpuProcessView = GpuDeviceView["processes"][number];
export type Health = z.infer<typeof S.Health>;

export function isTerminal(status: JobStatus): boolean {
  return !isActive(status);
}
