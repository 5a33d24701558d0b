import { chmodSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { ConfigSchema, type Config } from "../../src/config/schema.ts";
import type { Logger } from "../../src/logger.ts";
import { openJobStore } from "../../src/store/job-store.ts";
import type { Job, JobStore } from "../../src/store/job-store.ts";
import { isActive } from "../../src/job.ts";
import type { Dispatcher } from "../../src/dispatch/dispatch.ts";
import type { Supervisor } from "../../src/supervisor/supervisor.ts";
import { createWorker, type WorkerDeps } from "../../src/cli/worker.ts";
import { describeTrainer, type Trainer } from "../../src/trainer/trainer.ts";
import { openGate } from "./auth-setup.ts";
import { FAKE_NVIDIA_SMI, MAIN, type HostTree } from "./host-tree.ts";
import { waitFor } from "./wait.ts";

export const TRAINERS = join(import.meta.dir, "../fixtures/trainers");
export const REAL_LOGS = join(import.meta.dir, "../fixtures/real");

// The tests read state and answers, not log lines.
export const silentLogger: Logger = { info() {}, warn() {}, error() {} };

// Real mode with `accelerate` replaced by a fixture script: the supervisor cannot tell the difference.
export interface ConfigOverrides {
  trainer?: Record<string, unknown>;
  watchdog?: Record<string, unknown>;
  gpu?: Record<string, unknown>;
}

export function realModeConfig(tree: HostTree, accelerate: string, overrides: ConfigOverrides = {}): Config {
  const sdScripts = join(tree.root, "sd-scripts");
  mkdirSync(sdScripts, { recursive: true });
  writeFileSync(join(sdScripts, "sdxl_train_network.py"), "");
  return ConfigSchema.parse({
    state_dir: tree.state,
    handoff_root: tree.handoff,
    model_roots: [tree.models],
    trainer: { mode: "real", accelerate, sd_scripts_dir: sdScripts, cancel_grace_seconds: 0.5, ...overrides.trainer },
    watchdog: overrides.watchdog ?? {},
    gpu: { nvidia_smi: FAKE_NVIDIA_SMI, ...overrides.gpu },
  });
}

// Dispatches a request the test expects to be accepted; anything else fails the test with the answer.
type WorkerOptions = Partial<Pick<WorkerDeps, "memoryEvents" | "gpu" | "bodyDeadlineMs" | "auth" | "likeness">>;

// A dispatch that was accepted and has left its `preparing` phase: its trainer launched, or the job already ended.
export async function dispatchOk(
  s: { dispatcher: Dispatcher; supervisor: Supervisor; store: JobStore },
  body: unknown,
): Promise<Job> {
  const result = await s.dispatcher.dispatch(body);
  if (!result.ok) throw new Error(`dispatch refused: ${JSON.stringify(result)}`);
  const { id } = result.value;
  return waitFor(() => {
    const row = s.store.get(id)!;
    return s.supervisor.isRunning(id) || !isActive(row.status) ? row : null;
  }, `job ${id} to be launched`);
}

// Simulate mode as the worker runs it: the simulator is this program started from source.
export function simulateModeConfig(tree: HostTree, simulate: Record<string, unknown>, overrides: ConfigOverrides = {}): Config {
  return ConfigSchema.parse({
    state_dir: tree.state,
    handoff_root: tree.handoff,
    model_roots: [tree.models],
    trainer: { mode: "simulate", cancel_grace_seconds: 0.5, ...overrides.trainer },
    simulate,
    watchdog: overrides.watchdog ?? {},
    gpu: { nvidia_smi: FAKE_NVIDIA_SMI, ...overrides.gpu },
  });
}

export const SIMULATOR = [process.execPath, MAIN];

// A trainer that prints a recorded real log, then exits with the given code.
export function replayTrainer(tree: HostTree, log: string, exitCode: number): string {
  const path = join(tree.root, `replay-${log}.sh`);
  writeFileSync(path, `#!/bin/sh\ncat '${join(REAL_LOGS, log)}'\nexit ${exitCode}\n`);
  chmodSync(path, 0o755);
  return path;
}

// The worker in process as serve.ts makes it (createWorker), on the tree's state dir, with no token and no log.
// The configured trainer, run as `command`: a test may put a fixture script in accelerate's (or the simulator's) place.
function trainerFor(config: Config, command: string[]): Trainer {
  return { ...describeTrainer(config, command), command };
}

export function supervisorFor(tree: HostTree, config: Config, trainerCommand: string[], opts: WorkerOptions = {}) {
  const store = openJobStore(join(tree.state, "jobs.db"));
  const loaded = { config, file: null, defaultsInUse: [], envOverrides: [] };
  const worker = createWorker({
    loaded, store, log: silentLogger, auth: openGate(), trainer: trainerFor(config, trainerCommand),
    shim: { command: [process.execPath, MAIN], path: process.env.PATH! }, environment: {},
    version: "test", startedAt: Date.now(), ...opts,
  });
  const { supervisor } = worker;
  return {
    ...worker,
    // Nothing a test started may outlive it: cancel what still runs, let it settle, then close.
    async [Symbol.asyncDispose]() {
      for (const job of store.activeJobs()) await supervisor.cancel(job.id);
      await supervisor.untilIdle();
      store.close();
    },
  };
}
