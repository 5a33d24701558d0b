import { type AppDeps, createApp } from "../api/app.ts";
import { createDispatcher } from "../dispatch/dispatch.ts";
import { createGpuProbe, type GpuProbe } from "../gpu/probe.ts";
import type { Logger } from "../logger.ts";
import type { JobStore } from "../store/job-store.ts";
import { markedProcesses } from "../os/proc.ts";
import { createStateHealth } from "../store/state-health.ts";
import { jobDirs } from "../job-dir/job-dir.ts";
import {
  createBackends, createSupervisor, type BackendEnvironment, type ShimCommand, type SupervisorDeps,
} from "../supervisor/index.ts";
import type { Trainer } from "../trainer/trainer.ts";
import { SAME_PERSON } from "../likeness/points.ts";
import { scorerFor } from "../likeness/scorer.ts";

type Built = "supervisor" | "dispatcher" | "backend" | "stateHealth" | "gpu" | "dirs";

export interface WorkerDeps extends Omit<AppDeps, Built> {
  store: JobStore;
  log: Logger;
  /** How a run is started: the trainer (accelerate, or the simulator), and this program as the shim. */
  trainer: Trainer;
  shim: ShimCommand;
  /** The environment the worker started with, for the backends' own tools (Slurm's SLURM_CONF). */
  environment: BackendEnvironment;
  now?: () => Date;
  memoryEvents?: SupervisorDeps["memoryEvents"];
  /** The scorer of the runs' previews (#47), when not the one `[likeness]` names. */
  likeness?: SupervisorDeps["likeness"];
  /** The GPU probe, when not the config's `nvidia-smi` at its timeout and cache. */
  gpu?: GpuProbe;
}

export type Worker = ReturnType<typeof createWorker>;

// The worker as one piece, from its store on: its job directories, the GPU probe, the backend that places runs
// (chosen here, once), the supervisor of its runs, the dispatcher that starts them and the HTTP app over them.
// `lora-worker serve` binds the app to its socket; tests ask it in process.
export function createWorker(deps: WorkerDeps) {
  const { store, log, loaded } = deps;
  const { config } = loaded;
  const now = deps.now ?? (() => new Date());
  const gpu = deps.gpu ?? createGpuProbe({
    nvidiaSmi: config.gpu.nvidia_smi,
    timeoutMs: config.gpu.probe_timeout_ms,
    ttlMs: config.gpu.cache_ttl_ms,
  });
  const dirs = jobDirs(config.state_dir);
  const backends = createBackends(config, deps.shim, deps.environment);
  const backend = backends.chosen;
  const stateHealth = createStateHealth(store, config.state_dir, now);
  const memoryEvents = deps.memoryEvents ?? null;
  const scorer = scorerFor(config);
  const likeness = deps.likeness ?? { embedder: scorer?.embedder ?? null, threshold: SAME_PERSON };
  const supervisor = createSupervisor({ store, config, backends, dirs, now, log, memoryEvents, likeness });
  const markedJobs = () => markedProcesses().keys();
  const { trainer } = deps;
  const dispatcher = createDispatcher({
    store, gpu, config, supervisor, backend, dirs, stateHealth, markedJobs, trainer, now, log, scorer,
  });
  const app = createApp({ ...deps, supervisor, dispatcher, backend, dirs, stateHealth, gpu });
  return { store, gpu, supervisor, dispatcher, app };
}
