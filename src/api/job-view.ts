import { isActive } from "../job.ts";
import type { Progress } from "../progress/progress.ts";
import type { JobRow } from "../store/job-store.ts";

// The wire shape of SPEC §3; optional fields appear only when they carry a value.
export function jobView(row: JobRow, live: Progress | null) {
  const progress = live ?? { phase: row.phase, step: row.step, total_steps: row.total_steps, loss: row.loss, eta_s: row.eta_s };
  const terminal = !isActive(row.status);
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
    forced_kill: row.forced_kill === 1,
    request: JSON.parse(row.request) as unknown,
  };
}

function optional<T extends Record<string, unknown>>(fields: T): Partial<T> {
  return Object.fromEntries(Object.entries(fields).filter(([, v]) => v !== null && v !== undefined)) as Partial<T>;
}
