import { join } from "node:path";
import type { Config } from "../config/schema.ts";
import { type CaptionTokens, captionTokens } from "../dataset/clip-tokens.ts";
import type { GpuProbe } from "../gpu/probe.ts";
import type { JobDirs } from "../job-dir/job-dir.ts";
import type { Logger } from "../logger.ts";
import type { JobStore } from "../store/job-store.ts";
import type { StateHealth } from "../store/state-health.ts";
import type { Backend, Supervisor } from "../supervisor/index.ts";
import { TOKENIZERS, tokenizerDir } from "../tokenizers/layout.ts";
import type { Trainer } from "../trainer/trainer.ts";
import { createResumeChecks } from "./resume.ts";
import type { Scorer } from "../likeness/scorer.ts";

/** What the dispatcher is built over. */
export interface DispatcherDeps {
  store: JobStore;
  gpu: GpuProbe;
  config: Config;
  /** Holds a claimed job's preparing phase and follows the run it launches. */
  supervisor: Supervisor;
  backend: Backend;
  dirs: JobDirs;
  /** Whether the state dir can take a claim. */
  stateHealth: StateHealth;
  /** The jobs whose marker some process on this host carries (os/proc's markedProcesses). */
  markedJobs: () => Iterable<string>;
  /** The face scorer a fresh dataset's photos are scored with (SPEC §8); null: none configured. */
  scorer: Scorer | null;
  /** What runs as the trainer, described once at start-up. */
  trainer: Trainer;
  now: () => Date;
  log: Logger;
}

/** What every step of a dispatch reads: its collaborators, and what follows from them once. */
export interface DispatchContext extends DispatcherDeps {
  resumeChecks: ReturnType<typeof createResumeChecks>;
  /** How the trainer's tokenizer counts a caption's tokens: read for each job (`tokenizers import` may have run). */
  captionTokensOf: () => CaptionTokens;
}

export function dispatchContext(deps: DispatcherDeps): DispatchContext {
  return {
    ...deps,
    resumeChecks: createResumeChecks(deps.store, deps.config.state_dir),
    captionTokensOf: () => captionTokens(join(tokenizerDir(deps.config), TOKENIZERS[0]!.folder)),
  };
}
