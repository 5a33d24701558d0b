import type { Config } from "../../config/schema.ts";
import { cotenantsOf } from "../../gpu/admission.ts";
import type { GpuProbe, ProbeResult } from "../../gpu/index.ts";
import type { JobStore } from "../../store/job-store.ts";
import type { Supervisor } from "../../supervisor/supervisor.ts";
import { Status } from "../openapi/schemas.ts";
import type { Family } from "./exposition.ts";


export interface WorkerMetricsDeps {
  store: JobStore;
  supervisor: Supervisor;
  gpu: GpuProbe;
  config: Config;
  version: string;
  commit: string;
}

export function jobFamilies(deps: WorkerMetricsDeps): Family[] {
  const counts = deps.store.countByStatus();
  const activeId = deps.supervisor.activeJobId();
  const live = activeId === null ? null : deps.supervisor.progress(activeId);
  const active = (name: string, help: string, value: number | null | undefined): Family => ({
    name,
    help,
    kind: "gauge",
    samples: activeId === null || value === null || value === undefined ? [] : [{ labels: { job_id: activeId }, value }],
  });
  return [
    { name: "lora_worker_build_info", help: "Version and commit of this worker.", kind: "gauge", samples: [{ labels: { version: deps.version, commit: deps.commit }, value: 1 }] },
    { name: "lora_worker_state_writable", help: "1 while the job database takes writes; 0 while the state dir cannot (new trains are refused).", kind: "gauge", samples: [{ value: deps.supervisor.stateFailure() === null ? 1 : 0 }] },
    { name: "lora_worker_jobs", help: "Jobs in the database, by status.", kind: "gauge", samples: Status.options.map((status) => ({ labels: { status }, value: counts[status] ?? 0 })) },
    active("lora_worker_active_job_step", "Current step of the active job.", live?.step),
    active("lora_worker_active_job_total_steps", "Total steps of the active job.", live?.total_steps),
    active("lora_worker_active_job_loss", "Latest finite avr_loss of the active job.", live?.loss),
    active("lora_worker_active_job_eta_seconds", "Estimated seconds left for the active job.", live?.eta_s),
  ];
}

export function gpuFamilies(probe: ProbeResult, deps: WorkerMetricsDeps): Family[] {
  const devices = probe.ok ? probe.devices : [];
  const perDevice = (name: string, help: string, pick: (d: (typeof devices)[number]) => number | null): Family => ({
    name,
    help,
    kind: "gauge",
    samples: devices.flatMap((d) => {
      const value = pick(d);
      return value === null ? [] : [{ labels: { index: d.index, name: d.name }, value }];
    }),
  });
  return [
    { name: "lora_worker_gpu_probe_ok", help: "1 when the latest nvidia-smi probe succeeded.", kind: "gauge", samples: [{ value: probe.ok ? 1 : 0 }] },
    { name: "lora_worker_gpu_probe_runs_total", help: "nvidia-smi probe runs started.", kind: "counter", samples: [{ value: deps.gpu.runs() }] },
    { name: "lora_worker_gpu_probe_failures_total", help: "nvidia-smi probe runs that failed.", kind: "counter", samples: [{ value: deps.gpu.failures() }] },
    perDevice("lora_worker_gpu_memory_used_mib", "VRAM in use per device.", (d) => d.memory_used_mib),
    perDevice("lora_worker_gpu_memory_free_mib", "VRAM free per device.", (d) => d.memory_free_mib),
    perDevice("lora_worker_gpu_cotenant_present", "1 when a co-tenant process holds the device.", (d) => (cotenantsOf(d, deps.config.gpu.cotenant_patterns).length > 0 ? 1 : 0)),
  ];
}
