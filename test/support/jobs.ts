import { isActive, JobStatus } from "../../src/job.ts";
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
