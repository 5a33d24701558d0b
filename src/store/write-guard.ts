import type { Logger } from "../logger.ts";

const WRITE_RETRY_MS = 1000;

type WriteGuard = (what: string, write: () => unknown) => boolean;

// Background work records through this: a write the state dir cannot take is reported false, never thrown
// (thrown from a callback it would end the worker and leave the run unsupervised). Logged once per streak.
export function createWriteGuard(log: Logger, jobId: string): WriteGuard {
  let failing = false;
  return (what, write) => {
    try {
      write();
    } catch (err) {
      if (!failing) {
        const error = (err as Error).message;
        log.error("could not record the job; keeping it in memory and retrying", { job_id: jobId, what, error });
      }
      failing = true;
      return false;
    }
    if (failing) log.info("recording the job again", { job_id: jobId, what });
    failing = false;
    return true;
  };
}

// The final record must land: it is retried until the state dir takes it. `waiting` hears the first refusal.
export async function writeUntilDone(
  guard: WriteGuard,
  what: string,
  write: () => unknown,
  waiting?: () => void,
): Promise<void> {
  for (let first = true; !guard(what, write); first = false) {
    if (first) waiting?.();
    await Bun.sleep(WRITE_RETRY_MS);
  }
}
