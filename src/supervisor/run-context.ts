import { existsSync } from "node:fs";
import { basename, join } from "node:path";
import type { Logger } from "../logger.ts";
import type { Checkpoint, Sample } from "../job.ts";
import type { Config } from "../config/schema.ts";
import type { Job, JobRecord, JobStore } from "../store/job-store.ts";
import type { JobDir, JobDirs } from "../job-dir/job-dir.ts";
import { isStrictlyInside } from "../request/contained-path.ts";
import type { Backend, PlacementRequest } from "./placement.ts";
import { recordReport } from "./run-report.ts";
import { TIERS } from "../tiers.ts";
import { sampleEvery } from "../recipe/samples.ts";
import { SAME_PERSON } from "../likeness/points.ts";
import { likenessPlan, type LikenessPlan, type LikenessScoring } from "./likeness.ts";

const NO_SCORER: LikenessScoring = { embedder: null, threshold: SAME_PERSON };

/** What a run is told: where its files are, its limits, what it inherits and already has, its own record. */
export interface RunContext {
  id: string;
  jobDir: JobDir;
  /** The state dir the job directory lies in: a trainer that fails as it fills is said to have filled it. */
  stateDir: string;
  /** Where the trainer writes its final LoRA (the job's run directory), and where the worker publishes it. */
  runFile: string;
  outputFile: string;
  /** The handoff root as configured: the publish reaches outputFile's folder from it, never through a link. */
  handoffRoot: string;
  /** The job's record: every write the run makes goes through it. */
  record: JobRecord;
  now: () => Date;
  log: Logger;
  graceMs: number;
  stallMs: number;
  deadline: number;
  nanUpdates: number;
  /** The tier's max_train_steps; null when the run's own announcement decides (a replayed recording). */
  expectedTotal: number | null;
  /** The step of the state a resumed run started from; 0 for a fresh run. */
  resumedAt: number;
  /** The predecessor's state a resumed run started from, while the record still offers it (no own state yet). */
  inherited: { step: number; state: string; digest: string | null } | null;
  /** The verified intermediate LoRAs on record (an adopted run's, or a resumed run's inherited ones). */
  checkpoints: Checkpoint[];
  /** A pause asked for before this worker took the run over. */
  pauseRequested: boolean;
  /** For a run that takes preview samples: those on record, and since when this run writes its own. */
  samples: { known: Sample[]; sinceMs: number } | null;
  /** The file whose oom_kill counter covers the trainer (cgroup v2 memory.events, v1 memory.oom_control); or null. */
  memoryEvents: string | null;
  /** Called after every change a watcher could see: progress, status, the end. */
  changed: () => void;
  /** How its previews are scored for likeness. */
  likeness: LikenessPlan;
  /** The steps its previews are drawn at (none without previews): their LoRAs are kept. */
  previewSteps: number[];
  /** Whether an event stream follows the job now: its output is then read more often. */
  watched: () => boolean;
}

/** What the worker gives every run it follows. */
export interface RunDeps {
  store: JobStore;
  config: Config;
  dirs: JobDirs;
  now: () => Date;
  log: Logger;
  /** Where the kernel counts OOM kills of the trainer's cgroup (cgroup v2 or v1's memory controller), if anywhere. */
  memoryEvents?: string | null;
  /** The scorer of the runs' previews; absent: none (`not_scored: scorer_missing`). */
  likeness?: LikenessScoring;
}

/** What a run is told, from its record: where its files are, its limits, what it inherits and already has. */
export function runContext(
  deps: RunDeps,
  row: Job,
  outputFile: string,
  backend: Backend,
  hooks: Pick<RunContext, "changed" | "watched">,
): RunContext {
  const { config, store, now, log } = deps;
  const { request } = row;
  const dir = deps.dirs.of(row.id);
  const startedAt = Date.parse(row.started_at ?? row.created_at);
  const boundMs = config.watchdog.tier_timeout_seconds[TIERS[request.tier].budget] * 1000;
  // A run launched before run directories existed writes its LoRA straight into the output dir.
  const runFile = existsSync(dir.run) ? join(dir.run, basename(outputFile)) : outputFile;
  return {
    id: row.id, jobDir: dir, stateDir: config.state_dir, runFile, outputFile, handoffRoot: config.handoff_root,
    record: store.record(row.id), now, log,
    graceMs: config.trainer.cancel_grace_seconds * 1000,
    stallMs: config.watchdog.stall_seconds * 1000,
    deadline: backend.deadline(startedAt, boundMs),
    nanUpdates: config.watchdog.nan_updates,
    expectedTotal: row.total_steps,
    resumedAt: row.resumed_from_step ?? 0,
    checkpoints: row.checkpoints,
    inherited: row.resume_state === null || row.resume_step === null || isStrictlyInside(dir.run, row.resume_state)
      ? null
      : { step: row.resume_step, state: row.resume_state, digest: row.resume_digest },
    pauseRequested: row.pause_requested_at !== null,
    samples: (request.samples ?? 0) > 0 ? { known: row.samples, sinceMs: Date.parse(row.created_at) } : null,
    memoryEvents: deps.memoryEvents ?? null,
    likeness: likenessPlan(deps.likeness ?? NO_SCORER, row, dir.dataset),
    previewSteps: previewSteps(request),
    ...hooks,
  };
}

// Every multiple of the preview cadence up to the tier's last step (recipe/samples.ts).
function previewSteps(request: Job["request"]): number[] {
  if ((request.samples ?? 0) === 0) return [];
  const { maxTrainSteps } = TIERS[request.tier];
  const every = sampleEvery(maxTrainSteps);
  return Array.from({ length: maxTrainSteps / every }, (_, i) => (i + 1) * every);
}

/** What the run's backend is told: the fields it reads, and a report the run's record takes. */
export function placementRequest(ctx: RunContext, row: Job): PlacementRequest {
  const { id, jobDir, graceMs, now, log } = ctx;
  return { id, jobDir, train: row.request, graceMs, now, log, report: recordReport(ctx.record, now, log, ctx.changed) };
}
