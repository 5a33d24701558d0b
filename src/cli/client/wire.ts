// The worker's answers as the client reads them (README "API"); only what the client shows is typed.
export type JobStatus = "starting" | "training" | "succeeded" | "failed" | "cancelled";

export interface JobView {
  worker_job_id: string;
  status: JobStatus;
  phase: string;
  step: number;
  total_steps: number | null;
  loss: number | null;
  eta_s: number | null;
  lora_path?: string;
  lora_sha256?: string;
  lora_bytes?: number;
  error?: string;
  error_code?: string;
  created_at: string;
  started_at?: string;
  ended_at?: string;
  simulated: boolean;
  exit_code?: number;
  signal?: string;
  forced_kill: boolean;
  request: Record<string, unknown>;
}

export interface JobPage {
  jobs: JobView[];
  next_cursor: string | null;
}

export interface Dispatched {
  worker_job_id: string;
  status: JobStatus;
}

export interface GpuProcessView {
  pid: number;
  name: string;
  used_mib: number | null;
  role: "training" | "cotenant" | "other";
}

export interface GpuDeviceView {
  index: number;
  name: string;
  uuid: string;
  memory_total_mib: number | null;
  memory_used_mib: number | null;
  memory_free_mib: number | null;
  utilization_pct: number | null;
  processes: GpuProcessView[];
}

export interface GpuStatus {
  devices: GpuDeviceView[];
  cotenants: { device_index: number; pid: number; name: string; used_mib: number | null }[];
  tts_on_3090: boolean;
}

export interface Health {
  active_job_id: string | null;
}

export function isTerminal(status: JobStatus): boolean {
  return status === "succeeded" || status === "failed" || status === "cancelled";
}
