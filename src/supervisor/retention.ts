import { readdir, rm } from "node:fs/promises";
import { sizeOf } from "../fs.ts";
import type { Logger } from "../logger.ts";
import type { JobStore } from "../store/job-store.ts";
import { isStrictlyInside } from "../request/contained-path.ts";
import { jobDirs } from "../job-dir/job-dir.ts";

// How often retention runs after the one at start-up.
const INTERVAL_MS = 60 * 60 * 1000;
const DAY_MS = 24 * 60 * 60 * 1000;
// Records marked pruned per commit.
const PRUNE_BATCH = 500;

interface RetentionDeps {
  store: JobStore;
  stateDir: string;
  keepDays: number;
  keepLast: number;
  now: () => Date;
  log: Logger;
}

interface Pruned {
  jobs: string[];
  bytes: number;
}

// The state dir does not grow forever: an ended job's directory (its log, its dataset copy and latent caches, its
// run directory with states, intermediate LoRAs and samples) goes once the job is older than keep_days and not
// among the newest keep_last; its record stays, marked pruned. A directory holding the state another job's record
// resumes from (a resumed run that saved none of its own yet) stays until that state is replaced.
// The record is marked first, then the directory removed: a kill in between leaves a marked job, which cannot be
// resumed, and its directory goes at the next round.
// Every removal and every look at the disk is asynchronous (the thread pool's), so the worker answers while it
// prunes a backlog of a thousand job directories.
export function createRetention(deps: RetentionDeps) {
  let stateBytes: number | null = null;
  const dirs = jobDirs(deps.stateDir);
  const jobs = dirs.root;
  const prune = async (): Promise<Pruned> => {
    const cutoff = new Date(deps.now().getTime() - deps.keepDays * DAY_MS).toISOString();
    const pruned: Pruned = { jobs: [], bytes: 0 };
    const remove = async (id: string) => {
      pruned.bytes += await dirs.of(id).remove();
    };
    // Marked by an earlier round that was cut short.
    for (const id of await readdir(jobs).catch(() => [] as string[])) {
      if (deps.store.isPruned(id)) await remove(id);
    }
    const candidates = deps.store.prunable(cutoff, deps.keepLast);
    for (let at = 0; at < candidates.length; at += PRUNE_BATCH) {
      const batch = candidates.slice(at, at + PRUNE_BATCH);
      const pruning = batch.map(({ id }) => ({ id, dir: dirs.of(id).dir }));
      const marked = new Set(deps.store.markPruned(pruning, deps.now().toISOString()));
      for (const { id, resume_state: state, resumed_by: successor } of batch) {
        if (!marked.has(id)) continue;
        await remove(id);
        // An older version saved states into the output dir, beside the LoRA: one nobody took over goes too.
        if (state !== null && successor === null && !isStrictlyInside(jobs, state)) {
          pruned.bytes += await sizeOf(state);
          await rm(state, { recursive: true, force: true });
        }
        pruned.jobs.push(id);
      }
    }
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

