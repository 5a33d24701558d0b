import type { Logger } from "../logger.ts";
import type { JobRecord } from "../store/job-store.ts";
import type { RunReport } from "./placement.ts";

/** What a backend reports of a run, written onto the job's record: the supervisor's side of the report. */
export function recordReport(record: JobRecord, now: () => Date, log: Logger, changed: () => void): RunReport {
  // Bookkeeping the run does not wait on: a write the state dir cannot take is logged, and the run goes on.
  const logged = (what: string, write: () => void) => {
    try {
      write();
    } catch (err) {
      log.error(`could not record ${what}`, { job_id: record.id, error: (err as Error).message });
    }
  };
  return {
    shim: (identity) => void record.markShim(identity),
    trainer: (identity) => logged("the trainer's identity", () => record.markSpawned(identity, now().toISOString())),
    scheduled: (schedulerId) => void record.markScheduled(schedulerId),
    started: () => logged("the run's start", () => record.markStarted(now().toISOString())),
    changed,
  };
}
