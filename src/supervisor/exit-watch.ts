import { type ExitFile, readExit } from "../job-dir/job-dir.ts";

// How often an adopted run's exit file and shim are looked at. A launch of ours hears its shim exit at once and
// looks only as a backstop.
const POLL_MS = 500;
const BACKSTOP_MS = 5000;

/** A scheduler's own verdict on the run (Slurm's TIMEOUT, OUT_OF_MEMORY, NODE_FAIL, CANCELLED): outranks the shim's. */
export interface SchedulerVerdict {
  scheduler: "TIMEOUT" | "OUT_OF_MEMORY" | "NODE_FAIL" | "CANCELLED";
  detail: string;
}

/** How a run's trainer ended, as its shim recorded it, lost, or as the scheduler judged it. */
export type ExitWatch = ExitFile | { lost: true } | SchedulerVerdict;

// Resolves when the shim records the trainer's end, or when the shim is gone without a word
// (killed with -9, say): then the exit status is lost and the caller must say so.
export function watchExit(jobDir: string, shimAlive: () => boolean, shimExited?: Promise<unknown>): Promise<ExitWatch> {
  let resolve: (value: ExitWatch) => void = () => {};
  const result = new Promise<ExitWatch>((r) => (resolve = r));
  let done = false;
  const check = (allowLost: boolean) => {
    if (done) return;
    const exit = readExit(jobDir);
    if (exit) return finish(exit);
    if (allowLost && !shimAlive()) finish({ lost: true });
  };
  const finish = (value: ExitWatch) => {
    done = true;
    clearInterval(poll);
    resolve(value);
  };
  const poll = setInterval(() => check(true), shimExited ? BACKSTOP_MS : POLL_MS);
  void shimExited?.then(() => check(true));
  check(false);
  return result;
}
