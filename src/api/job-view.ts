import { isActive } from "../job.ts";
import type { LiveProgress } from "../supervisor/supervisor.ts";
import type { Checkpoint, JobRow } from "../store/job-store.ts";
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
