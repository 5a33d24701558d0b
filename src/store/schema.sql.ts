import { JobStatus } from "../job.ts";

// Lifecycle state (status, phase) is kept apart from outcome (exit_code, signal, error_code).
export const SCHEMA = `
CREATE TABLE IF NOT EXISTS jobs (
  id TEXT PRIMARY KEY,
  status TEXT NOT NULL CHECK (status IN (${JobStatus.options.map((s) => `'${s}'`).join(",")})),
  phase TEXT NOT NULL,
  step INTEGER NOT NULL DEFAULT 0,
  total_steps INTEGER,
  loss REAL,
  eta_s REAL,
  lora_path TEXT,
  lora_sha256 TEXT,
  lora_bytes INTEGER,
  error TEXT,
  error_code TEXT,
  created_at TEXT NOT NULL,
  started_at TEXT,
  ended_at TEXT,
  request TEXT NOT NULL,
  request_hash TEXT NOT NULL,
  idempotency_key TEXT UNIQUE,
  simulated INTEGER NOT NULL,
  admission_warning TEXT,
  pid INTEGER,
  pid_start_ticks INTEGER,
  boot_id TEXT,
  exit_code INTEGER,
  signal TEXT,
  shim_pid INTEGER,
  shim_start_ticks INTEGER,
  forced_kill INTEGER NOT NULL DEFAULT 0,
  cancel_requested_at TEXT,
  stop_reason TEXT,
  stop_requested_at TEXT,
  dataset_files INTEGER,
  dataset_bytes INTEGER,
  dataset_sha256 TEXT,
  dataset_report TEXT,
  pruned_at TEXT,
  output_file TEXT,
  resume_step INTEGER,
  resume_state TEXT,
  resume_digest TEXT,
  resume_gone TEXT,
  checkpoints TEXT,
  resumed_from TEXT,
  resumed_from_step INTEGER,
  resumed_by TEXT,
  pause_requested_at TEXT,
  samples TEXT,
  likeness TEXT,
  base_model_print TEXT,
  slurm_job_id TEXT,
  log_path TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS jobs_created ON jobs (created_at);
-- The active job and a status-filtered page are found without walking the history.
CREATE INDEX IF NOT EXISTS jobs_status ON jobs (status, created_at, id);
-- The paused and the resumable jobs are counted (and listed) by these, not by walking every ended job: they hold
-- only the rows of each filter (job.ts isPaused and isResumable; test/unit/job-words.test.ts holds them equal).
CREATE INDEX IF NOT EXISTS jobs_paused_now ON jobs (created_at, id)
  WHERE status = 'cancelled' AND stop_reason = 'pause' AND resumed_by IS NULL;
CREATE INDEX IF NOT EXISTS jobs_saved ON jobs (created_at, id)
  WHERE status IN ('failed', 'cancelled') AND resume_state IS NOT NULL AND resumed_by IS NULL;
-- One point per training step: bounded by the tier's max_train_steps. A nan loss is NULL.
CREATE TABLE IF NOT EXISTS loss_points (
  job_id TEXT NOT NULL,
  step INTEGER NOT NULL,
  loss REAL,
  PRIMARY KEY (job_id, step)
) WITHOUT ROWID;
`;
