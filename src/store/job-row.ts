import {
  ACTIVE_STATUSES, type Checkpoint, type DatasetReport, type ErrorCode, type JobFilter, type JobStatus, type Likeness,
  type ProgressFields, type Sample, type StopReason,
} from "../job.ts";
import type { BaseModelPrint } from "../request/base-model.ts";
import type { JobRequest } from "../request/schema.ts";

/** A job as the database holds it: JSON in text columns, booleans as 0/1. Decoded once, into a Job, as it is read. */
export interface JobRow extends ProgressFields {
  id: string;
  status: JobStatus;
  lora_path: string | null;
  lora_sha256: string | null;
  lora_bytes: number | null;
  error: string | null;
  error_code: ErrorCode | null;
  created_at: string;
  started_at: string | null;
  ended_at: string | null;
  request: string;
  request_hash: string;
  idempotency_key: string | null;
  simulated: number;
  admission_warning: string | null;
  pid: number | null;
  pid_start_ticks: number | null;
  boot_id: string | null;
  exit_code: number | null;
  signal: string | null;
  shim_pid: number | null;
  shim_start_ticks: number | null;
  forced_kill: number;
  cancel_requested_at: string | null;
  stop_reason: StopReason | null;
  stop_requested_at: string | null;
  dataset_files: number | null;
  dataset_bytes: number | null;
  dataset_sha256: string | null;
  /** JSON of DatasetReport: what the worker did to the copy and found in it; null until it is prepared. */
  dataset_report: string | null;
  pruned_at: string | null;
  /** Where the verified LoRA is published: output_dir's file, resolved; null in a database an older build wrote. */
  output_file: string | null;
  /** The newest complete saved state a resume would start from (its step and directory), or null. */
  resume_step: number | null;
  resume_state: string | null;
  resume_digest: string | null;
  /** Why a state this job once had is gone (removed after success, pruned, replaced by a successor's). */
  resume_gone: string | null;
  /** JSON array of Checkpoint: the verified intermediate LoRAs still on disk. */
  checkpoints: string | null;
  resumed_from: string | null;
  /** The step of the state a resumed job started from. */
  resumed_from_step: number | null;
  resumed_by: string | null;
  pause_requested_at: string | null;
  /** JSON array of Sample: the preview images of the run (and of the runs it resumed), as found on disk. */
  samples: string | null;
  /** JSON Likeness: the preview points scored against the dataset's identity, and the verdict at the end. */
  likeness: string | null;
  /** What the base model was at dispatch (JSON: size, mtime, header digest). */
  base_model_print: string | null;
  /** The run's Slurm batch job, on the Slurm backend. */
  slurm_job_id: string | null;
  log_path: string;
}

/** A job on record, as every reader outside the store sees it. */
export type Job = Omit<
  JobRow, "request" | "simulated" | "forced_kill" | "checkpoints" | "samples" | "dataset_report" | "base_model_print"
  | "likeness"
> & {
  request: JobRequest;
  simulated: boolean;
  forced_kill: boolean;
  /** The verified intermediate LoRAs still on disk. */
  checkpoints: Checkpoint[];
  /** The preview images of the run (and of the runs it resumed), as found on disk. */
  samples: Sample[];
  /** What the worker did to the dataset copy and found in it (a resume's is its predecessor's copy's). */
  dataset_report: DatasetReport | null;
  /** What the base model was at dispatch: a resume refuses a replaced one. */
  base_model_print: BaseModelPrint | null;
  /** Whether the LoRA shows the person: null for a run whose previews were never looked at. */
  likeness: Likeness | null;
};

/** A row decoded; frozen, since readers share what the store caches. */
export function toJob(row: JobRow): Job {
  return Object.freeze({
    ...row,
    request: JSON.parse(row.request) as JobRequest,
    simulated: row.simulated === 1,
    forced_kill: row.forced_kill === 1,
    checkpoints: row.checkpoints === null ? [] : (JSON.parse(row.checkpoints) as Checkpoint[]),
    samples: row.samples === null ? [] : (JSON.parse(row.samples) as Sample[]),
    dataset_report: row.dataset_report === null ? null : (JSON.parse(row.dataset_report) as DatasetReport),
    base_model_print: row.base_model_print === null ? null : (JSON.parse(row.base_model_print) as BaseModelPrint),
    likeness: row.likeness === null ? null : (JSON.parse(row.likeness) as Likeness),
  });
}

/** The SQL condition of an active job. */
export const ACTIVE_SQL = `status IN (${ACTIVE_STATUSES.map((s) => `'${s}'`).join(",")})`;

/** The filters that are no single status: job.ts isPaused and isResumable in SQL (test/unit/job-words.test.ts). */
export const FILTER_SQL: Partial<Record<JobFilter, string>> = {
  paused: "status = 'cancelled' AND stop_reason = 'pause' AND resumed_by IS NULL",
  resumable: "status IN ('failed', 'cancelled') AND resume_state IS NOT NULL AND resumed_by IS NULL",
};
