import type { Config } from "../config/schema.ts";
import { cotenantsOf } from "../gpu/admission.ts";
import type { GpuDevice } from "../gpu/probe.ts";
import { isActive } from "../job.ts";
import { readProcStat } from "../os/proc.ts";
import type { LiveProgress } from "../supervisor/supervisor.ts";
import type { Checkpoint, JobRow, LossPoint } from "../store/job-store.ts";
import { SAMPLE_TEMPLATES, samplePrompt } from "../recipe/samples.ts";
import type { JobRequest } from "../request/schema.ts";
import { TIERS } from "../tiers.ts";
import type { Sample } from "../supervisor/checkpoints.ts";

// The wire shape of SPEC §3; optional fields appear only when they carry a value. A run whose outcome the state dir
// has not taken yet is answered with that outcome, marked `recorded: false`.
export function jobView(recorded: JobRow, live: LiveProgress | null) {
  const ended = live?.unrecorded ?? null;
  const row: JobRow = ended === null ? recorded : {
    ...recorded,
    ...ended.outcome,
    forced_kill: ended.outcome.forced_kill ? 1 : 0,
    ended_at: ended.ended_at,
  };
  const progress = live ?? {
    phase: row.phase,
    step: row.step,
    total_steps: row.total_steps,
    loss: row.loss,
    eta_s: row.eta_s,
  };
  const terminal = !isActive(row.status);
  const request = JSON.parse(row.request) as JobRequest;
  return {
    worker_job_id: row.id,
    status: row.status,
    phase: terminal && row.status === "succeeded" ? "done" : progress.phase,
    step: progress.step,
    total_steps: progress.total_steps,
    loss: progress.loss,
    eta_s: terminal ? null : progress.eta_s,
    ...optional({
      lora_path: row.lora_path,
      lora_sha256: row.lora_sha256,
      lora_bytes: row.lora_bytes,
      error: row.error,
      error_code: row.error_code,
    }),
    created_at: row.created_at,
    ...optional({ started_at: row.started_at, ended_at: row.ended_at }),
    simulated: row.simulated === 1,
    ...optional({ exit_code: row.exit_code, signal: row.signal, admission_warning: row.admission_warning }),
    ...optional({ queue_reason: live?.queue_reason ?? null, slurm_job_id: row.slurm_job_id }),
    ...(row.dataset_sha256 === null
      ? {}
      : { dataset: { files: row.dataset_files, bytes: row.dataset_bytes, sha256: row.dataset_sha256 } }),
    ...resumeView(row),
    ...(terminal ? {} : optional({ pause_step: pauseStep(row, request, progress.step, progress.total_steps) })),
    samples: samplesOf(row).map(({ path: _path, ...sample }) => ({
      ...sample,
      template: SAMPLE_TEMPLATES[sample.index]?.name ?? null,
      prompt: samplePrompt(request, sample.index),
      url: `/train/${row.id}/samples/${encodeURIComponent(sample.name)}`,
    })),
    forced_kill: row.forced_kill === 1,
    ...(ended === null ? {} : { recorded: false }),
    request: request as unknown,
  };
}

// Where a pause asked of a running job will stop it: the next state its tier saves (every checkpointEvery steps
// of the whole chain), or null when the run reaches its end first.
function pauseStep(row: JobRow, request: JobRequest, step: number, total: number | null): number | null {
  if (row.pause_requested_at === null) return null;
  const every = TIERS[request.tier].checkpointEvery;
  const next = (Math.floor(step / every) + 1) * every;
  return total !== null && next >= total ? null : next;
}

// The preview images on record; only these are ever served.
export function samplesOf(row: JobRow): Sample[] {
  return row.samples === null ? [] : (JSON.parse(row.samples) as Sample[]);
}

// The verified intermediate LoRAs on record; only these are ever served.
export function checkpointsOf(row: JobRow): Checkpoint[] {
  return row.checkpoints === null ? [] : (JSON.parse(row.checkpoints) as Checkpoint[]);
}

// What can be resumed, and how this job relates to the runs before and after it.
function resumeView(row: JobRow) {
  return {
    resume_step: row.resume_step,
    resumable:
      (row.status === "failed" || row.status === "cancelled") && row.resume_state !== null && row.resumed_by === null,
    checkpoints: checkpointsOf(row).map(({ path: _path, ...checkpoint }) => ({
      ...checkpoint,
      url: `/train/${row.id}/checkpoints/${checkpoint.step}`,
    })),
    paused: row.stop_reason === "pause" && row.status === "cancelled",
    ...optional({
      pause_requested_at: row.pause_requested_at,
      resumed_from: row.resumed_from,
      resumed_from_step: row.resumed_from_step,
      resumed_by: row.resumed_by,
      resume_gone: row.resume_gone,
    }),
  };
}

function optional<T extends Record<string, unknown>>(fields: T): Partial<T> {
  return Object.fromEntries(Object.entries(fields).filter(([, v]) => v !== null && v !== undefined)) as Partial<T>;
}

// Largest-Triangle-Three-Buckets: keeps first and last point, and from each bucket the point that
// spans the largest triangle with its neighbours, so peaks and the curve's shape survive.
export function downsample(points: ReadonlyArray<[number, number]>, max: number): Array<[number, number]> {
  if (points.length <= max || max < 3) return points.slice(0, Math.max(max, 0)) as Array<[number, number]>;
  const out: Array<[number, number]> = [points[0]!];
  const size = (points.length - 2) / (max - 2);
  let prev = points[0]!;
  for (let b = 0; b < max - 2; b++) {
    const start = Math.floor(b * size) + 1;
    const end = Math.floor((b + 1) * size) + 1;
    const next = average(points, end, Math.min(Math.floor((b + 2) * size) + 1, points.length));
    let best = points[start]!;
    let bestArea = -1;
    for (let i = start; i < end; i++) {
      const p = points[i]!;
      const area = Math.abs((prev[0] - next[0]) * (p[1] - prev[1]) - (prev[0] - p[0]) * (next[1] - prev[1]));
      if (area > bestArea) [best, bestArea] = [p, area];
    }
    out.push(best);
    prev = best;
  }
  out.push(points.at(-1)!);
  return out;
}

function average(points: ReadonlyArray<[number, number]>, from: number, to: number): [number, number] {
  if (from >= to) return points.at(-1)!;
  let x = 0;
  let y = 0;
  for (let i = from; i < to; i++) [x, y] = [x + points[i]![0], y + points[i]![1]];
  return [x / (to - from), y / (to - from)];
}

// Nan steps carry no height to plot: they are counted, and only finite points are thinned.
export function lossCurve(history: LossPoint[], max: number) {
  const finite = history.filter((p): p is [number, number] => p[1] !== null);
  return { points: downsample(finite, max), total_points: history.length, nan_points: history.length - finite.length };
}

type Role = "training" | "cotenant" | "other";

// `tts_on_3090` is kept for arbo's client: a co-tenant on the device of the 24 GB class.
const CLASS_OF_3090 = "24gb";

// Only the few processes nvidia-smi lists are looked up: no scan of /proc on every request.
export function gpuStatusView(devices: GpuDevice[], config: Config, trainerPgid: number | null) {
  const pids = devices.flatMap((d) => d.processes.map((p) => p.pid));
  const ours = new Set(trainerPgid === null ? [] : pids.filter((pid) => readProcStat(pid)?.pgrp === trainerPgid));
  const cotenants = devices.flatMap((d) => {
    return cotenantsOf(d, config.gpu.cotenant_patterns).filter((c) => !ours.has(c.pid));
  });
  const cotenantPids = new Set(cotenants.map((c) => c.pid));
  const roleOf = (pid: number): Role => (ours.has(pid) ? "training" : cotenantPids.has(pid) ? "cotenant" : "other");
  const index3090 = config.devices.find((d) => d.class === CLASS_OF_3090)?.index;
  return {
    devices: devices.map((d) => ({ ...d, processes: d.processes.map((p) => ({ ...p, role: roleOf(p.pid) })) })),
    cotenants,
    tts_on_3090: cotenants.some((c) => c.device_index === index3090),
  };
}
