import { randomUUID } from "node:crypto";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Config } from "../config/schema.ts";
import type { Logger } from "../log/logger.ts";
import type { Progress } from "../progress/progress.ts";
import { buildLaunch, type JobPaths } from "../recipe/command.ts";
import { checkTrain, type CheckedTrain } from "../request/checked-train.ts";
import type { DetailItem } from "../request/validation-error.ts";
import type { JobRow, JobStore } from "../store/job-store.ts";
import { reconcileOrphans } from "./reconcile.ts";
import { startRun, type Run } from "./run.ts";

export interface SupervisorDeps {
  store: JobStore;
  config: Config;
  trainerCommand: string[];
  now: () => Date;
  log: Logger;
}

export type DispatchResult =
  | { ok: true; job: JobRow }
  | { ok: false; kind: "invalid"; detail: DetailItem[] }
  | { ok: false; kind: "output_exists"; detail: string }
  | { ok: false; kind: "busy"; activeId: string };

export type Supervisor = ReturnType<typeof createSupervisor>;

export function jobPaths(config: Config, id: string): JobPaths & { log: string } {
  const dir = join(config.state_dir, "jobs", id);
  return { dir, log: join(dir, "train.log"), datasetConfig: join(dir, "dataset.toml"), hfHome: join(config.state_dir, "hf-home") };
}

export function createSupervisor(deps: SupervisorDeps) {
  const { store, config, now, log } = deps;
  const runs = new Map<string, Run>();

  // Synchronous from the insert to the spawn: no cancel can slip in before the pid is known.
  const launch = (train: CheckedTrain): JobRow => {
    const id = randomUUID();
    const paths = jobPaths(config, id);
    const claim = store.insertIfIdle({ id, request: train.request, simulated: config.trainer.mode === "simulate", logPath: paths.log, now: now().toISOString() });
    if (!claim.inserted) throw new BusyError(claim.activeId);
    try {
      const plan = buildLaunch(train, config, paths, deps.trainerCommand);
      mkdirSync(paths.dir, { recursive: true, mode: 0o750 });
      writeFileSync(paths.datasetConfig, plan.dataset_toml, { mode: 0o640 });
      mkdirSync(train.outputDir, { recursive: true, mode: 0o770 });
      const run = startRun({ id, plan, logPath: paths.log, outputFile: train.outputFile, store, now, log, cancelGraceMs: config.trainer.cancel_grace_seconds * 1000 });
      runs.set(id, run);
      void run.finished.finally(() => runs.delete(id));
      log.info("job started", { job_id: id, pid: run.pgid, tier: train.request.tier, device_index: train.device.index, simulated: config.trainer.mode === "simulate" });
    } catch (err) {
      const error = `the trainer could not be started: ${(err as Error).message}`;
      store.finish(id, { status: "failed", error_code: "spawn_failed", error, exit_code: null, signal: null, forced_kill: false, lora_path: null, lora_sha256: null, lora_bytes: null }, now().toISOString());
      log.error("spawn failed", { job_id: id, error });
    }
    return store.get(id)!;
  };

  return {
    async dispatch(body: unknown): Promise<DispatchResult> {
      const checked = await checkTrain(body, config);
      if (!checked.ok) return checked;
      try {
        return { ok: true, job: launch(checked.value) };
      } catch (err) {
        if (err instanceof BusyError) return { ok: false, kind: "busy", activeId: err.activeId };
        throw err;
      }
    },

    // Intent is recorded before any signal, so the exit is read as a cancel, not a failure.
    async cancel(id: string): Promise<JobRow | null> {
      const row = store.get(id);
      if (!row) return null;
      if (!store.requestCancel(id, now().toISOString())) return row;
      const run = runs.get(id);
      if (run) {
        log.info("cancelling job", { job_id: id, pgid: run.pgid });
        await run.terminate(config.trainer.cancel_grace_seconds * 1000);
        await run.finished;
      }
      return store.get(id);
    },

    progress(id: string): Progress | null {
      return runs.get(id)?.progress() ?? null;
    },

    activeTrainerPid(): number | null {
      const [run] = runs.values();
      return run?.pgid ?? null;
    },

    activeJobId(): string | null {
      return store.activeJobs()[0]?.id ?? null;
    },

    async reconcile(): Promise<void> {
      await reconcileOrphans({ store, now, log, graceMs: config.trainer.cancel_grace_seconds * 1000 });
    },

    // Lets running jobs finish their bookkeeping; used by tests and orderly shutdown.
    async settle(): Promise<void> {
      await Promise.all([...runs.values()].map((r) => r.finished));
    },
  };
}

class BusyError extends Error {
  constructor(readonly activeId: string) {
    super(`job ${activeId} is active`);
  }
}
