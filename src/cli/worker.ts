import { type AppDeps, createApp } from "../api/app.ts";
import { createDispatcher } from "../dispatch/dispatch.ts";
import { createGpuProbe, type GpuProbe } from "../gpu/probe.ts";
import type { Logger } from "../logger.ts";
import type { JobStore } from "../store/job-store.ts";
import { createSupervisor, type SupervisorDeps } from "../supervisor/supervisor.ts";

export interface WorkerDeps extends Omit<AppDeps, "supervisor" | "dispatcher" | "gpu"> {
  store: JobStore;
  log: Logger;
  /** How a run is started: accelerate (or the simulator), and this program as the shim. */
  trainerCommand: string[];
  selfCommand: string[];
  now?: () => Date;
  memoryEvents?: SupervisorDeps["memoryEvents"];
  /** The GPU probe, when not the config's `nvidia-smi` at its timeout and cache. */
  gpu?: GpuProbe;
}

export type Worker = ReturnType<typeof createWorker>;

// The worker as one piece, from its store on: the GPU probe, the supervisor of its runs, the dispatcher that starts
// them and the HTTP app over them. `lora-worker serve` binds the app to its socket; tests ask it in process.
export function createWorker(deps: WorkerDeps) {
  const { store, log, loaded } = deps;
  const { config } = loaded;
  const now = deps.now ?? (() => new Date());
  const gpu = deps.gpu ?? createGpuProbe({
    nvidiaSmi: config.gpu.nvidia_smi,
    timeoutMs: config.gpu.probe_timeout_ms,
    ttlMs: config.gpu.cache_ttl_ms,
  });
  const supervisor = createSupervisor({
    store, config, selfCommand: deps.selfCommand, now, log, memoryEvents: deps.memoryEvents ?? null,
  });
  const { trainerCommand } = deps;
  const dispatcher = createDispatcher({ store, gpu, config, supervisor, trainerCommand, now, log });
  const app = createApp({ ...deps, supervisor, dispatcher, gpu });
  return { store, gpu, supervisor, dispatcher, app };
}
