import { lstatSync, readdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import type { Logger } from "../logger.ts";
import type { JobStore } from "../store/job-store.ts";
import { jobPaths } from "./job-dir.ts";

// How often retention runs after the one at start-up.
const INTERVAL_MS = 60 * 60 * 1000;
const DAY_MS = 24 * 60 * 60 * 1000;

export interface RetentionDeps {
  store: JobStore;
  stateDir: string;
  keepDays: number;
  keepLast: number;
  now: () => Date;
  log: Logger;
}

export interface Pruned {
  jobs: string[];
  bytes: number;
}

// The state dir does not grow forever: an ended job's directory (its log, its dataset copy and latent caches) goes
// once the job is older than keep_days and not among the newest keep_last; its record stays, marked pruned. Its
// saved state in the output dir goes with it, unless a resume took the state over.
export function createRetention(deps: RetentionDeps) {
  let stateBytes: number | null = null;
  const prune = (): Pruned => {
    const cutoff = new Date(deps.now().getTime() - deps.keepDays * DAY_MS).toISOString();
    const pruned: Pruned = { jobs: [], bytes: 0 };
    for (const { id, resume_state: state, resumed_by: successor } of deps.store.prunable(cutoff, deps.keepLast)) {
      const dir = jobPaths(deps.stateDir, id).dir;
      const bytes = sizeOf(dir) + (state !== null && successor === null ? sizeOf(state) : 0);
      rmSync(dir, { recursive: true, force: true });
      if (state !== null && successor === null) {
        rmSync(state, { recursive: true, force: true });
        deps.store.dropResume(id, "its saved state was pruned by retention with its job directory");
      }
      deps.store.markPruned(id, deps.now().toISOString());
      pruned.jobs.push(id);
      pruned.bytes += bytes;
    }
    stateBytes = sizeOf(deps.stateDir);
    if (pruned.jobs.length > 0) {
      const { jobs, bytes } = pruned;
      deps.log.info("pruned old job directories", { jobs: jobs.length, bytes, job_ids: jobs });
    }
    return pruned;
  };
  // A failure (a full or read-only state dir) is logged and tried again at the next round.
  const round = () => {
    try {
      prune();
    } catch (err) {
      deps.log.error("could not prune old job directories", { error: (err as Error).message });
    }
  };
  return {
    prune,
    /** The state dir's size as the last round measured it, or null before the first. */
    stateBytes: () => stateBytes,
    // The first round runs just after start-up, not in its way (it walks the state dir to measure it).
    start(): () => void {
      const first = setTimeout(round, 0);
      const timer = setInterval(round, INTERVAL_MS);
      return () => (clearTimeout(first), clearInterval(timer));
    },
  };
}

export type Retention = ReturnType<typeof createRetention>;

function sizeOf(path: string): number {
  let st;
  try {
    st = lstatSync(path);
  } catch {
    return 0;
  }
  // lstat: a link is counted as itself and never followed out of the state dir.
  if (!st.isDirectory()) return st.size;
  return readdirSync(path).reduce((sum, name) => sum + sizeOf(join(path, name)), 0);
}
