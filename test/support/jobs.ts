import { isActive, JobStatus } from "../../src/job.ts";
import { TIERS } from "../../src/tiers.ts";
import { waitFor } from "./wait.ts";

// A job's ended statuses, from the job's own vocabulary.
export const ENDED_STATUSES: readonly string[] = JobStatus.options.filter((s) => !isActive(s));

/** Anything that answers a path with its JSON: a worker process, or the app in process. */
interface Answers {
  json(path: string, init?: RequestInit): Promise<{ status: number; body: any }>;
}

/** The job's record once it has ended (succeeded, failed or cancelled). */
export function untilEnded(on: Answers, id: string, timeoutMs = 60_000, init?: RequestInit): Promise<any> {
  return waitFor(async () => {
    const { body } = await on.json(`/train/${id}`, init);
    return ENDED_STATUSES.includes(body.status) ? body : null;
  }, `job ${id} to end`, timeoutMs);
}

/** Whether `step` is one of a fast run's saved states past `after`: a multiple of its checkpointEvery, short of its
 * end. A loaded host can read two announcements at once and verify the later state, so a test bounds the step a
 * pause stopped at, or a newer state replaced an older one at, rather than fixing it. */
export function isFastStateStep(step: unknown, after = 0): boolean {
  const { checkpointEvery, maxTrainSteps } = TIERS.fast;
  return typeof step === "number" && step > after && step < maxTrainSteps && step % checkpointEvery === 0;
}

/** The step of the newer state of job `by` that a record's `resume_gone` says replaced its own; NaN when it says
 * something else. */
export function replacedAtStep(resumeGone: string | null | undefined, by: string): number {
  const said = /^replaced by job (\S+)'s newer state at step (\d+)$/.exec(resumeGone ?? "");
  return said?.[1] === by ? Number(said[2]) : Number.NaN;
}
