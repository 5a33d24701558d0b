export { createGpuProbe, type GpuProbeDeps } from "./gpu-probe.ts";
export type { GpuDevice, GpuProbe, GpuProcess, ProbeResult } from "./types.ts";
