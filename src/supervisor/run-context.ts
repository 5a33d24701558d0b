import { existsSync } from "node:fs";
import { basename, join } from "node:path";
import type { Config } from "../config/schema.ts";
import type { Logger } from "../logger.ts";
import type { Job, JobStore } from "../store/job-store.ts";
import type { JobDirs } from "../job-dir/job-dir.ts";
import { isStrictlyInside } from "../request/contained-path.ts";
import type { Backend, RunContext } from "./placement.ts";
import { TIERS } from "../tiers.ts";

// What the worker gives every run it follows.
interface RunDeps {
  store: JobStore;
  config: Config;
  dirs: JobDirs;
  now: () => Date;
  log: Logger;
  memoryEvents?: string | null;
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
    store, now, log,
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
    ...hooks,
  };
}
