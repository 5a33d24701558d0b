import type { MiddlewareHandler } from "hono";
import type { Config } from "../config/schema.ts";
import { cotenantsOf } from "../gpu/admission.ts";
import type { GpuProbe, ProbeResult } from "../gpu/probe.ts";
import { ErrorCode, JobStatus, LikenessVerdict } from "../job.ts";
import type { StateHealth } from "../store/state-health.ts";
import type { LiveProgress } from "../supervisor/index.ts";
import type { JobViews } from "./job-view.ts";
import type { Family } from "./prometheus.ts";

// Upper bounds in seconds: loopback answers live in the first few; cancel and gpu-status in the last.
const BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

interface RouteStats {
  // By status, then method: the counters exist after a route's first answer, so counting allocates nothing.
  requests: Map<number, Map<string, number>>;
  // Answers per bucket (the first bucket that holds the time); cumulative only when exported.
  counts: number[];
  sum: number;
  total: number;
}

// Requests and latency by route pattern (never by raw path: job ids would explode the series).
export function createHttpMetrics() {
  const routes = new Map<string, RouteStats>();

  const observe = (method: string, route: string, status: number, seconds: number) => {
    let stats = routes.get(route);
    if (stats === undefined) {
      routes.set(route, (stats = { requests: new Map(), counts: BUCKETS.map(() => 0), sum: 0, total: 0 }));
    }
    let byMethod = stats.requests.get(status);
    if (byMethod === undefined) stats.requests.set(status, (byMethod = new Map()));
    byMethod.set(method, (byMethod.get(method) ?? 0) + 1);
    let bucket = 0;
    while (bucket < BUCKETS.length && seconds > BUCKETS[bucket]!) bucket++;
    if (bucket < BUCKETS.length) stats.counts[bucket]! += 1;
    stats.sum += seconds;
    stats.total += 1;
  };

  const middleware: MiddlewareHandler = async (c, next) => {
    const started = performance.now();
    await next();
    const path = c.req.routePath;
    const route = path && path !== "*" && path !== "/*" ? path : "unmatched";
    observe(c.req.method, route, c.res.status, (performance.now() - started) / 1000);
  };

  const families = (): Family[] => [
    {
      name: "lora_worker_http_requests_total",
      help: "HTTP requests answered, by method, route pattern and status.",
      kind: "counter",
      samples: [...routes].flatMap(([route, s]) =>
        [...s.requests].flatMap(([status, byMethod]) =>
          [...byMethod].map(([method, value]) => ({ labels: { method, route, status: String(status) }, value })),
        ),
      ),
    },
    {
      name: "lora_worker_http_request_duration_seconds",
      help: "Time to answer an HTTP request, by route pattern.",
      kind: "histogram",
      samples: [...routes].flatMap(([route, s]) => {
        let upTo = 0;
        return [
          ...BUCKETS.map((le, i) => {
            upTo += s.counts[i]!;
            return { suffix: "_bucket", labels: { route, le: String(le) }, value: upTo };
          }),
          { suffix: "_bucket", labels: { route, le: "+Inf" }, value: s.total },
          { suffix: "_sum", labels: { route }, value: s.sum },
          { suffix: "_count", labels: { route }, value: s.total },
        ];
      }),
    },
  ];

  return { middleware, families };
}

export type HttpMetrics = ReturnType<typeof createHttpMetrics>;

interface WorkerMetricsDeps {
  views: JobViews;
  stateHealth: StateHealth;
  gpu: GpuProbe;
  config: Config;
  version: string;
  commit: string;
  // The state dir's size as retention last measured it; null before its first round.
  stateBytes: number | null;
}

export function jobFamilies(deps: WorkerMetricsDeps): Family[] {
  const { active: jobs, byStatus: counts, failuresByCode: failures, saved, verdicts } = deps.views.tally();
  // One sample per active job, labelled by it: one on this host, up to slurm.max_active_jobs on Slurm.
  const live = jobs.flatMap(({ job, live }) => (live === null ? [] : [{ id: job.id, progress: live }]));
  const active = (name: string, help: string, value: (p: LiveProgress) => number | null): Family => ({
    name,
    help,
    kind: "gauge",
    samples: live.flatMap(({ id, progress }) => {
      const v = value(progress);
      return v === null ? [] : [{ labels: { job_id: id }, value: v }];
    }),
  });
  return [
    {
      name: "lora_worker_build_info",
      help: "Version and commit of this worker.",
      kind: "gauge",
      samples: [{ labels: { version: deps.version, commit: deps.commit }, value: 1 }],
    },
    {
      name: "lora_worker_state_writable",
      help: "1 while the job database takes writes; 0 while the state dir cannot (new trains are refused).",
      kind: "gauge",
      samples: [{ value: deps.stateHealth.failure() === null ? 1 : 0 }],
    },
    {
      name: "lora_worker_state_dir_bytes",
      help: "Bytes under the state dir (records, logs, dataset copies), as the last retention round measured them.",
      kind: "gauge",
      samples: deps.stateBytes === null ? [] : [{ value: deps.stateBytes }],
    },
    {
      name: "lora_worker_jobs",
      help: "Jobs in the database, by status.",
      kind: "gauge",
      samples: JobStatus.options.map((status) => ({ labels: { status }, value: counts[status] ?? 0 })),
    },
    {
      name: "lora_worker_jobs_paused",
      help: "Jobs paused at a saved state and not resumed yet (counted among the cancelled in lora_worker_jobs).",
      kind: "gauge",
      samples: [{ value: saved.paused }],
    },
    {
      name: "lora_worker_jobs_resumable",
      help: "Failed or cancelled jobs with a saved state that no resume has taken yet (paused ones included).",
      kind: "gauge",
      samples: [{ value: saved.resumable }],
    },
    {
      name: "lora_worker_likeness_verdicts_total",
      help: "Ended runs by likeness verdict, whether the LoRA shows the person (records are kept, so this only grows).",
      kind: "counter",
      samples: LikenessVerdict.options.map((verdict) => ({ labels: { verdict }, value: verdicts[verdict] ?? 0 })),
    },
    {
      name: "lora_worker_jobs_failed_total",
      help: "Jobs that failed, by error_code (records are kept, so this only grows).",
      kind: "counter",
      samples: ErrorCode.options.map((code) => ({ labels: { error_code: code }, value: failures[code] ?? 0 })),
    },
    active("lora_worker_active_job_step", "Current step of each active job.", (p) => p.step),
    active("lora_worker_active_job_total_steps", "Total steps of each active job.", (p) => p.total_steps),
    active("lora_worker_active_job_loss", "Latest finite avr_loss of each active job.", (p) => p.loss),
    active("lora_worker_active_job_eta_seconds", "Estimated seconds left for each active job.", (p) => p.eta_s),
  ];
}

export function gpuFamilies(probe: ProbeResult, deps: WorkerMetricsDeps): Family[] {
  const devices = probe.ok ? probe.value : [];
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
    {
      name: "lora_worker_gpu_probe_ok",
      help: "1 when the latest nvidia-smi probe succeeded.",
      kind: "gauge",
      samples: [{ value: probe.ok ? 1 : 0 }],
    },
    {
      name: "lora_worker_gpu_probe_runs_total",
      help: "nvidia-smi probe runs started.",
      kind: "counter",
      samples: [{ value: deps.gpu.runs() }],
    },
    {
      name: "lora_worker_gpu_probe_failures_total",
      help: "nvidia-smi probe runs that failed.",
      kind: "counter",
      samples: [{ value: deps.gpu.failures() }],
    },
    perDevice("lora_worker_gpu_memory_used_mib", "VRAM in use per device.", (d) => d.memory_used_mib),
    perDevice("lora_worker_gpu_memory_free_mib", "VRAM free per device.", (d) => d.memory_free_mib),
    perDevice(
      "lora_worker_gpu_cotenant_present",
      "1 when a co-tenant process holds the device.",
      (d) => (cotenantsOf(d, deps.config.gpu.cotenant_patterns).length > 0 ? 1 : 0),
    ),
  ];
}
