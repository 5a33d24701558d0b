import { isActive, isPaused, isResumable, type ProgressFields } from "../job.ts";
import type { LiveProgress, Supervisor } from "../supervisor/index.ts";
import type { JobFilter } from "../job.ts";
import type { Job, JobStore } from "../store/job-store.ts";
import { sampleOf, samplePrompt, saveEvery } from "../recipe/samples.ts";
import type { JobRequest } from "../request/schema.ts";
import { TIERS } from "../tiers.ts";
import { datasetReportView } from "./dataset-view.ts";
import { LIKENESS_STEPS, NEXT_STEPS } from "./next-steps.ts";

/** A job on record with its run's live progress over it (null when no run of it is live). */
export interface FreshJob {
  job: Job;
  live: LiveProgress | null;
}

/** The API's one reader of jobs: every read is fresh (`supervisor.fresh`: the runs' output up to FRESH_MS ago taken
 * in before a record is read), and a job's answer is serialised once per change of its record or its run's progress
 * (both stay the same objects until they change), however many clients poll or stream it. */
export function createJobViews(store: JobStore, supervisor: Supervisor) {
  const answers = new WeakMap<Job, { live: LiveProgress | null; json: string }>();
  const answerOf = ({ job, live }: FreshJob): string => {
    const known = answers.get(job);
    if (known && known.live === live) return known.json;
    const json = JSON.stringify(jobView(job, live));
    answers.set(job, { live, json });
    return json;
  };
  const read = (id: string): FreshJob | null =>
    supervisor.fresh((live) => {
      const job = store.get(id);
      return job === null ? null : { job, live: live(id) };
    });
  return {
    read,
    view(id: string): { job: Job; json: string } | null {
      const fresh = read(id);
      return fresh === null ? null : { job: fresh.job, json: answerOf(fresh) };
    },
    // Newest first, a page of them.
    list(filter: JobFilter | null, limit: number, after: { createdAt: string; id: string } | null) {
      return supervisor.fresh((live) =>
        store.list(filter, limit, after).map((job) => ({ job, view: jobView(job, live(job.id)) })));
    },
    // What /metrics counts: the active jobs with their runs' progress, and the tallies of every job.
    tally() {
      return supervisor.fresh((live) => ({
        active: store.activeJobs().map((job) => ({ job, live: live(job.id) })),
        byStatus: store.countByStatus(),
        failuresByCode: store.countFailuresByCode(),
        verdicts: store.countVerdicts(),
        saved: store.countSaved(),
      }));
    },
  };
}

/** The API's reader of jobs. */
export type JobViews = ReturnType<typeof createJobViews>;

// The wire shape of SPEC §3; optional fields appear only when they carry a value. A run whose outcome the state dir
// has not taken yet is answered with that outcome, marked `recorded: false`.
export function jobView(recorded: Job, live: LiveProgress | null) {
  const ended = live?.unrecorded ?? null;
  const row: Job = ended === null ? recorded : {
    ...recorded,
    ...ended.outcome,
    ended_at: ended.ended_at,
  };
  // The run's progress while one is live, else the record's.
  const progress: ProgressFields = live ?? row;
  const terminal = !isActive(row.status);
  const { request } = row;
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
      // Once a resume took the job, what was to be done is done.
      next_step: row.error_code === null || row.resumed_by !== null ? null : NEXT_STEPS[row.error_code],
    }),
    created_at: row.created_at,
    ...optional({ started_at: row.started_at, ended_at: row.ended_at }),
    simulated: row.simulated,
    ...optional({ exit_code: row.exit_code, signal: row.signal, admission_warning: row.admission_warning }),
    ...optional({ queue_reason: live?.queue_reason ?? null, slurm_job_id: row.slurm_job_id }),
    ...(row.dataset_sha256 === null
      ? {}
      : {
        dataset: {
          files: row.dataset_files, bytes: row.dataset_bytes, sha256: row.dataset_sha256,
          ...(row.dataset_report === null ? {} : { prepared: datasetReportView(row.dataset_report) }),
        },
      }),
    ...resumeView(row),
    ...(terminal ? {} : optional({ pause_step: pauseStep(row, request, progress.step, progress.total_steps) })),
    samples: row.samples.map(({ path: _path, ...sample }) => ({
      ...sample,
      template: sampleOf(sample.index)?.template.name ?? null,
      subject: sampleOf(sample.index)?.subject ?? null,
      prompt: samplePrompt(request, sample.index),
      url: `/train/${row.id}/samples/${encodeURIComponent(sample.name)}`,
    })),
    ...optional({ likeness: likenessView(row) }),
    forced_kill: row.forced_kill,
    ...(ended === null ? {} : { recorded: false }),
    request,
  };
}

// Where a pause asked of a running job will stop it: the next state its tier saves (every checkpointEvery steps
// of the whole chain), or null when the run reaches its end first.
function pauseStep(row: Job, request: JobRequest, step: number, total: number | null): number | null {
  if (row.pause_requested_at === null) return null;
  const every = saveEvery(TIERS[request.tier], (request.samples ?? 0) > 0);
  const next = (Math.floor(step / every) + 1) * every;
  return total !== null && next >= total ? null : next;
}

// What can be resumed, and how this job relates to the runs before and after it.
function resumeView(row: Job) {
  return {
    resume_step: row.resume_step,
    resumable: isResumable(row),
    checkpoints: row.checkpoints.map(({ path: _path, ...checkpoint }) => ({
      ...checkpoint,
      url: `/train/${row.id}/checkpoints/${checkpoint.step}`,
    })),
    paused: isPaused(row),
    ...optional({
      pause_requested_at: row.pause_requested_at,
      resumed_from: row.resumed_from,
      resumed_from_step: row.resumed_from_step,
      resumed_by: row.resumed_by,
      resume_gone: row.resume_gone,
    }),
  };
}

// The report as recorded, with where its best LoRA is fetched and what to do with its verdict.
function likenessView({ id, likeness }: Job) {
  if (likeness === null) return null;
  const url = likeness.best_sha256 === null ? null : `/train/${id}/checkpoints/${likeness.best_step}`;
  return { ...likeness, best_url: url, next_step: likeness.verdict === null ? null : LIKENESS_STEPS[likeness.verdict] };
}

function optional<T extends Record<string, unknown>>(fields: T): Partial<T> {
  return Object.fromEntries(Object.entries(fields).filter(([, v]) => v !== null && v !== undefined)) as Partial<T>;
}
