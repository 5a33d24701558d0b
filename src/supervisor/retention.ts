import { lstat, readdir, rm } from "node:fs/promises";
import { join } from "node:path";
import type { Logger } from "../logger.ts";
import type { JobStore } from "../store/job-store.ts";
import { jobPaths } from "./job-dir.ts";

// How often retention runs after the one at start-up.
const INTERVAL_MS = 60 * 60 * 1000;
const DAY_MS = 24 * 60 * 60 * 1000;
// Records marked pruned per commit.
const PRUNE_BATCH = 500;

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
// Every removal and every look at the disk is asynchronous (the thread pool's), so the worker answers while it
// prunes a backlog of a thousand job directories.
export function createRetention(deps: RetentionDeps) {
  let stateBytes: number | null = null;
  const prune = async (): Promise<Pruned> => {
    const cutoff = new Date(deps.now().getTime() - deps.keepDays * DAY_MS).toISOString();
    const pruned: Pruned = { jobs: [], bytes: 0 };
    let batch: string[] = [];
    const record = () => {
      deps.store.markPruned(batch, deps.now().toISOString());
      pruned.jobs.push(...batch);
      batch = [];
    };
    for (const { id, resume_state: state, resumed_by: successor } of deps.store.prunable(cutoff, deps.keepLast)) {
      const dir = jobPaths(deps.stateDir, id).dir;
      const bytes = await sizeOf(dir);
      // A state a resume already took over is not removed, so not measured.
      const stateSize = state === null || successor !== null ? 0 : await sizeOf(state);
      await rm(dir, { recursive: true, force: true });
      // Asked again in the same turn as the removal starts: a resume may have taken the state over meanwhile.
      if (state !== null && deps.store.get(id)?.resumed_by === null) {
        const removal = rm(state, { recursive: true, force: true });
        pruned.bytes += stateSize;
        await removal;
        deps.store.dropResume(id, "its saved state was pruned by retention with its job directory");
      }
      batch.push(id);
      pruned.bytes += bytes;
      if (batch.length === PRUNE_BATCH) record();
    }
    record();
    stateBytes = await sizeOf(deps.stateDir);
    if (pruned.jobs.length > 0) {
      const { jobs, bytes } = pruned;
      deps.log.info("pruned old job directories", { jobs: jobs.length, bytes, job_ids: jobs });
    }
    return pruned;
  };
  // A failure (a full or read-only state dir) is logged and tried again at the next round; one round at a time,
  // since a slow disk may still be pruning when the next is due.
  let running: Promise<unknown> | null = null;
  const round = () => {
    running ??= prune()
      .catch((err: Error) => deps.log.error("could not prune old job directories", { error: err.message }))
      .finally(() => (running = null));
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

async function sizeOf(path: string): Promise<number> {
  let st;
  try {
    st = await lstat(path);
  } catch {
    return 0;
  }
  // lstat: a link is counted as itself and never followed out of the state dir.
  if (!st.isDirectory()) return st.size;
  let sum = 0;
  for (const name of await readdir(path).catch(() => [])) sum += await sizeOf(join(path, name));
  return sum;
}
