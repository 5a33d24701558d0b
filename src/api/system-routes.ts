import { Hono } from "hono";
import type { AuthGate } from "../auth/setup.ts";
import type { LoadedConfig } from "../config/load.ts";
import type { GpuProbe, ProbeResult } from "../gpu/probe.ts";
import type { Backend, Supervisor } from "../supervisor/index.ts";
import type { JobStore } from "../store/job-store.ts";
import type { StateHealth } from "../store/state-health.ts";
import type { Trainer } from "../trainer/trainer.ts";
import { tokenizerDir, watchTokenizers } from "../tokenizers/layout.ts";
import { BUILD } from "../version.ts";
import { ApiError } from "./errors.ts";
import type { JobViews } from "./job-view.ts";
import { gpuFamilies, jobFamilies, type HttpMetrics } from "./metrics.ts";
import { openApiDocument } from "./openapi-document.ts";
import { render } from "./prometheus.ts";
import { gpuStatusView } from "../gpu/status-view.ts";

export interface SystemRouteDeps {
  loaded: LoadedConfig;
  store: JobStore;
  supervisor: Supervisor;
  backend: Backend;
  /** What runs as the trainer: /healthz says whether it is simulated. */
  trainer: Trainer;
  stateHealth: StateHealth;
  gpu: GpuProbe;
  version: string;
  startedAt: number;
  auth: AuthGate;
  keepOpen?: (req: Request) => void;
  /** The state dir's size as retention last measured it (absent in tests that run no retention). */
  stateBytes?: () => number | null;
}

// What the last nvidia-smi run said, however old: /healthz never waits for a probe.
function gpuFact(last: ProbeResult | null) {
  if (last === null) return { probed: false };
  const at = new Date(last.probed_at).toISOString();
  return last.ok
    ? { probed: true, ok: true, devices: last.value.length, probed_at: at }
    : { probed: true, ok: false, detail: last.error, probed_at: at };
}

// A state dir that cannot take writes degrades the worker: runs go on from memory, new trains are refused.
function stateFact(stateHealth: StateHealth, path: string) {
  const failure = stateHealth.failure();
  return failure === null
    ? { path, writable: true }
    : { path, writable: false, error: failure.error, since: failure.since };
}

// On a cluster the GPUs are its nodes': each node's, by type, and what of them running jobs hold.
async function clusterGpus(backend: Backend, nodes: NonNullable<Backend["nodes"]>) {
  const listed = await nodes();
  if (!listed.ok) throw new ApiError(503, { detail: listed.error, reason: "gpu_probe_failed" });
  return { backend: backend.kind, nodes: listed.value };
}

// The first active job keeps its old field for arbo's client; on Slurm there may be more.
function activeJobs(ids: string[]) {
  return { active_job_id: ids[0] ?? null, active_job_ids: ids };
}

export function systemRoutes(deps: SystemRouteDeps & { httpMetrics: HttpMetrics; views: JobViews }) {
  const { loaded, supervisor, backend, gpu } = deps;
  const { config } = loaded;
  const document = openApiDocument(deps.version);
  // The simulated trainer loads no tokenizer: a missing one is no problem of this worker's (doctor still names it).
  const tokenizers = deps.trainer.simulated
    ? () => ({ dir: tokenizerDir(config), ready: true, problems: [], required: false })
    : watchTokenizers(tokenizerDir(config));
  return new Hono()
    .get("/healthz", (c) =>
      c.json({
        status: "ok",
        version: deps.version,
        ...activeJobs(deps.store.activeJobs().map((job) => job.id)),
        unrecorded_job_ids: supervisor.unrecordedJobIds(),
        ...backend.facts,
        trainer_mode: config.trainer.mode,
        simulated: deps.trainer.simulated,
        auth_mode: deps.auth.mode,
        gpu: gpuFact(gpu.last()),
        state_dir: stateFact(deps.stateHealth, config.state_dir),
        tokenizers: tokenizers(),
        gpu_admission: config.gpu.admission,
        listen: config.listen.text,
        config_file: loaded.file,
        config_defaults_in_use: loaded.defaultsInUse,
        uptime_s: Math.round((Date.now() - deps.startedAt) / 1000),
      }),
    )
    .get("/openapi.json", (c) => c.json(document))
    .get("/metrics", async (c) => {
      deps.keepOpen?.(c.req.raw); // may wait on one nvidia-smi run, bounded by its timeout
      const metricsDeps = {
        views: deps.views,
        stateHealth: deps.stateHealth,
        gpu,
        config,
        version: deps.version,
        commit: BUILD.commit,
        stateBytes: deps.stateBytes?.() ?? null,
      };
      const families = [
        ...jobFamilies(metricsDeps),
        ...gpuFamilies(await gpu.read(), metricsDeps),
        ...deps.httpMetrics.families(),
      ];
      return c.body(render(families), 200, { "Content-Type": "text/plain; version=0.0.4; charset=utf-8" });
    })
    .get("/gpu-status", async (c) => {
      deps.keepOpen?.(c.req.raw); // bounded by the probe's own timeout, which may exceed the idle timeout
      if (backend.nodes !== null) return c.json(await clusterGpus(backend, backend.nodes));
      const result = await gpu.read();
      if (!result.ok) throw new ApiError(503, { detail: result.error, reason: "gpu_probe_failed" });
      return c.json(gpuStatusView(result.value, config, supervisor.activeTrainerPid()));
    });
}
