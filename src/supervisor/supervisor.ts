import { randomUUID } from "node:crypto";
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Config } from "../config/schema.ts";
import { failedOutcome } from "../job.ts";
import { judgeAdmission, type Admission, type Refusal } from "../gpu/admission.ts";
import type { GpuProbe } from "../gpu/index.ts";
import type { Logger } from "../log/logger.ts";
import type { Progress } from "../progress/progress.ts";
import { buildLaunch, type JobPaths } from "../recipe/command.ts";
import { TIERS } from "../recipe/hyperparameters.ts";
import { checkTrain, type CheckedTrain } from "../request/checked-train.ts";
import { recheckPaths } from "../request/recheck.ts";
import { TrainRequest as TrainRequestSchema, type TrainRequest } from "../request/train-request.ts";
import type { DetailItem } from "../request/validation-error.ts";
import { StoreWriteFailed, type JobRow, type JobStore } from "../store/job-store.ts";
import { createStateHealth } from "../store/state-health.ts";
import { markedProcesses } from "./marked-processes.ts";
import { reconcileOnStart } from "./reconcile.ts";
import { adoptRun, LaunchFailed, startRun, type Run, type RunContext } from "./run.ts";

export interface SupervisorDeps {
  store: JobStore;
  gpu: GpuProbe;
  config: Config;
  trainerCommand: string[];
  selfCommand: string[];
  now: () => Date;
  log: Logger;
  /** Where the kernel counts OOM kills of the trainer's cgroup (cgroup v2), if anywhere. */
  memoryEvents?: string | null;
}

export type DispatchResult =
  | { ok: true; job: JobRow }
  | { ok: false; kind: "invalid"; detail: DetailItem[] }
  | { ok: false; kind: "idempotency_mismatch"; detail: string }
  | { ok: false; kind: "refused"; refusal: Refusal }
  | { ok: false; kind: "output_exists"; detail: string }
  | { ok: false; kind: "busy"; activeId: string; unsupervised: boolean }
  | { ok: false; kind: "state_unwritable"; detail: string }
  | { ok: false; kind: "launch_failed"; job: JobRow };

export type Supervisor = ReturnType<typeof createSupervisor>;

export function jobPaths(config: Config, id: string): JobPaths & { log: string } {
  const dir = join(config.state_dir, "jobs", id);
  return { id, dir, log: join(dir, "train.log"), datasetConfig: join(dir, "dataset.toml"), hfHome: join(config.state_dir, "hf-home") };
}

export function createSupervisor(deps: SupervisorDeps) {
  const { store, config, now, log } = deps;
  const runs = new Map<string, Run>();
  const launches = new Set<string>();
  const stateHealth = createStateHealth(store, config.state_dir, now);
  const watchers = new Map<string, Set<() => void>>();
  const notify = (id: string) => {
    for (const watcher of watchers.get(id) ?? []) watcher();
  };

  const contextFor = (id: string, request: TrainRequest, outputFile: string, startedAt: number): RunContext => {
    const paths = jobPaths(config, id);
    return {
      id, dir: paths.dir, logPath: paths.log, outputFile, store, now, log,
      graceMs: config.trainer.cancel_grace_seconds * 1000,
      stallMs: config.watchdog.stall_seconds * 1000,
      deadline: startedAt + config.watchdog.tier_timeout_seconds[request.tier] * 1000,
      nanUpdates: config.watchdog.nan_updates,
      memoryEvents: deps.memoryEvents ?? null,
      expectedTotal: expectedTotal(request),
      changed: () => notify(id),
    };
  };
  // A replayed recording trains for its own number of steps, not the tier's.
  const expectedTotal = (request: TrainRequest) => (config.trainer.mode === "simulate" && config.simulate.replay_log !== "" ? null : TIERS[request.tier].maxTrainSteps);
  const track = (run: Run) => {
    runs.set(run.id, run);
    void run.finished.finally(() => runs.delete(run.id));
  };

  // A process of a job of this state dir that no run of ours follows: it may hold the GPU, so nothing starts.
  const unsupervisedJob = (): string | null => {
    for (const id of markedProcesses().keys()) if (!runs.has(id) && existsSync(jobPaths(config, id).dir)) return id;
    return null;
  };

  // A fresh probe right before the spawn: a cached answer may predate the co-tenant's last model load.
  const admit = async (train: CheckedTrain): Promise<Admission> => {
    if (config.gpu.admission === "off") return { admit: true, warning: null };
    return judgeAdmission(await deps.gpu.read({ fresh: true }), train.device, train.request.tier, config);
  };

  // A retried dispatch (same Idempotency-Key, or the same body while that job runs) is the same job.
  const replayOf = (hash: string, key: string | null): DispatchResult | null => {
    const keyed = key === null ? null : store.byIdempotencyKey(key);
    if (keyed) return keyed.request_hash === hash ? { ok: true, job: keyed } : { ok: false, kind: "idempotency_mismatch", detail: "this Idempotency-Key was already used with a different request body" };
    const active = key === null ? store.activeJobs().find((j) => j.request_hash === hash) : undefined;
    return active ? { ok: true, job: active } : null;
  };

  // Synchronous from the check to the claim: no other dispatch can slip in between. The claimed row keeps the
  // slot while the launch runs, and a cancel waits for the launch to be tracked.
  const claim = (train: CheckedTrain, hash: string, key: string | null, admissionWarning: string | null): DispatchResult => {
    // The dataset may have changed since the request was checked: resolve every path once more.
    const changed = recheckPaths(train, config);
    if (changed.length > 0) return { ok: false, kind: "invalid", detail: changed };
    const full = stateHealth.full();
    if (full !== null) return { ok: false, kind: "state_unwritable", detail: full.error };
    const stray = unsupervisedJob();
    if (stray !== null) return { ok: false, kind: "busy", activeId: stray, unsupervised: true };
    const id = randomUUID();
    const paths = jobPaths(config, id);
    try {
      const claimed = store.insertIfIdle({
        id, request: train.request, requestHash: hash, idempotencyKey: key, admissionWarning,
        simulated: config.trainer.mode === "simulate", logPath: paths.log, now: now().toISOString(), totalSteps: expectedTotal(train.request),
      });
      if (!claimed.inserted) return { ok: false, kind: "busy", activeId: claimed.activeId, unsupervised: false };
    } catch (err) {
      if (err instanceof StoreWriteFailed) return { ok: false, kind: "state_unwritable", detail: err.message };
      throw err;
    }
    return { ok: true, job: store.get(id)! };
  };

  const launch = async (row: JobRow, train: CheckedTrain): Promise<DispatchResult> => {
    const { id } = row;
    const paths = jobPaths(config, id);
    try {
      const plan = buildLaunch(train, config, paths, deps.trainerCommand);
      mkdirSync(join(paths.dir, "tmp"), { recursive: true, mode: 0o750 });
      writeFileSync(paths.datasetConfig, plan.dataset_toml, { mode: 0o640 });
      mkdirSync(train.outputDir, { recursive: true, mode: 0o770 });
      const ctx = contextFor(id, train.request, train.outputFile, Date.now());
      const launchFile = { argv: plan.argv, env: plan.env, cwd: plan.cwd, log: paths.log, logMaxBytes: config.trainer.log_max_bytes };
      const jobFile = {
        id, request: train.request, request_hash: row.request_hash, idempotency_key: row.idempotency_key,
        admission_warning: row.admission_warning, simulated: row.simulated === 1, created_at: row.created_at,
      };
      track(await startRun(ctx, launchFile, jobFile, deps.selfCommand));
      log.info("job started", { job_id: id, tier: train.request.tier, device_index: train.device.index, simulated: config.trainer.mode === "simulate" });
      return { ok: true, job: store.get(id)! };
    } catch (err) {
      const error = `the trainer could not be started: ${(err as Error).message}`;
      log.error("spawn failed", { job_id: id, error, shim_started: err instanceof LaunchFailed });
      await recordSpawnFailure(id, error);
      return { ok: false, kind: "launch_failed", job: store.get(id) ?? row };
    }
  };

  // The slot stays claimed until the failure is on record; a state dir that cannot take it is retried.
  const recordSpawnFailure = async (id: string, error: string) => {
    const outcome = failedOutcome("spawn_failed", error);
    for (;;) {
      try {
        store.finish(id, outcome, now().toISOString());
        return;
      } catch (err) {
        if (!(err instanceof StoreWriteFailed)) throw err;
        await Bun.sleep(1000);
      }
    }
  };

  return {
    async dispatch(body: unknown, idempotencyKey: string | null = null): Promise<DispatchResult> {
      // Before the filesystem checks: a retry after success must not read as "output exists".
      const parsed = TrainRequestSchema.safeParse(body);
      const earlier = parsed.success ? replayOf(requestHash(parsed.data), idempotencyKey) : null;
      if (earlier) return earlier;
      const checked = await checkTrain(body, config);
      if (!checked.ok) return checked;
      const hash = requestHash(checked.value.request);
      const admission = await admit(checked.value);
      if (!admission.admit) return { ok: false, kind: "refused", refusal: admission.refusal };
      const again = replayOf(hash, idempotencyKey);
      if (again) return again;
      const claimed = claim(checked.value, hash, idempotencyKey, admission.warning);
      if (!claimed.ok) return claimed;
      launches.add(claimed.job.id);
      try {
        return await launch(claimed.job, checked.value);
      } finally {
        launches.delete(claimed.job.id);
      }
    },

    // Answers once no process of the job is left, with the final record.
    async cancel(id: string): Promise<JobRow | null> {
      const row = store.get(id);
      if (!row) return null;
      const run = runs.get(id) ?? (await launching(id));
      if (!run) return store.get(id);
      await run.stop("cancel");
      await run.finished;
      return store.get(id);
    },

    // Calls `watcher` after each change of the job; returns the unsubscribe.
    watch(id: string, watcher: () => void): () => void {
      const set = watchers.get(id) ?? new Set();
      watchers.set(id, set.add(watcher));
      return () => {
        set.delete(watcher);
        if (set.size === 0) watchers.delete(id);
      };
    },

    /** Why the state dir cannot take writes now, or null. */
    stateFailure() {
      return stateHealth.failure();
    },

    isRunning(id: string): boolean {
      return runs.has(id);
    },

    progress(id: string): Progress | null {
      return runs.get(id)?.progress() ?? null;
    },

    activeTrainerPid(): number | null {
      const [run] = runs.values();
      return run?.pgid() ?? null;
    },

    activeJobId(): string | null {
      return store.activeJobs()[0]?.id ?? null;
    },

    // Re-adopts what survived a restart of the worker (or the loss of its database); fails what did not.
    reconcile(): void {
      reconcileOnStart({ store, stateDir: config.state_dir, now, log }, ({ row, ids, pendingStop }) => {
        const request = JSON.parse(row.request) as TrainRequest;
        const outputFile = join(request.output_dir, `${request.output_name}.safetensors`);
        const ctx = contextFor(row.id, request, outputFile, Date.parse(row.started_at ?? row.created_at));
        try {
          track(adoptRun(ctx, ids, pendingStop));
        } catch (err) {
          log.error("could not re-adopt a running job", { job_id: row.id, error: (err as Error).message });
        }
      });
    },

    // Lets running jobs finish their bookkeeping; used by tests and orderly shutdown.
    async settle(): Promise<void> {
      await Promise.all([...runs.values()].map((r) => r.finished));
    },
  };

  // A cancel that arrives while its job is being launched waits for the run (or the launch's failure).
  async function launching(id: string): Promise<Run | undefined> {
    while (launches.has(id) && !runs.has(id)) await Bun.sleep(5);
    return runs.get(id);
  }
}

// Field order does not make two bodies different requests.
function requestHash(request: TrainRequest): string {
  const canonical = JSON.stringify(Object.fromEntries(Object.entries(request).sort(([a], [b]) => a.localeCompare(b))));
  return new Bun.CryptoHasher("sha256").update(canonical).digest("hex");
}
