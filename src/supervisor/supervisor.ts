import { randomUUID } from "node:crypto";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Config } from "../config/schema.ts";
import { judgeAdmission, type Admission, type Refusal } from "../gpu/admission.ts";
import type { GpuProbe } from "../gpu/index.ts";
import type { Logger } from "../log/logger.ts";
import type { Progress } from "../progress/progress.ts";
import { buildLaunch, type JobPaths } from "../recipe/command.ts";
import { checkTrain, type CheckedTrain } from "../request/checked-train.ts";
import { recheckPaths } from "../request/recheck.ts";
import { TrainRequest as TrainRequestSchema, type TrainRequest } from "../request/train-request.ts";
import type { DetailItem } from "../request/validation-error.ts";
import type { JobRow, JobStore } from "../store/job-store.ts";
import { reconcileOnStart } from "./reconcile.ts";
import { adoptRun, startRun, type Run, type RunContext } from "./run.ts";

export interface SupervisorDeps {
  store: JobStore;
  gpu: GpuProbe;
  config: Config;
  trainerCommand: string[];
  selfCommand: string[];
  now: () => Date;
  log: Logger;
}

export type DispatchResult =
  | { ok: true; job: JobRow }
  | { ok: false; kind: "invalid"; detail: DetailItem[] }
  | { ok: false; kind: "idempotency_mismatch"; detail: string }
  | { ok: false; kind: "refused"; refusal: Refusal }
  | { ok: false; kind: "output_exists"; detail: string }
  | { ok: false; kind: "busy"; activeId: string };

export type Supervisor = ReturnType<typeof createSupervisor>;

export function jobPaths(config: Config, id: string): JobPaths & { log: string } {
  const dir = join(config.state_dir, "jobs", id);
  return { id, dir, log: join(dir, "train.log"), datasetConfig: join(dir, "dataset.toml"), hfHome: join(config.state_dir, "hf-home") };
}

export function createSupervisor(deps: SupervisorDeps) {
  const { store, config, now, log } = deps;
  const runs = new Map<string, Run>();
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
      changed: () => notify(id),
    };
  };
  const track = (run: Run) => {
    runs.set(run.id, run);
    void run.finished.finally(() => runs.delete(run.id));
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

  // Synchronous from the insert to the spawn: no cancel can slip in before the run is tracked.
  const launch = (train: CheckedTrain, hash: string, key: string | null, admissionWarning: string | null): JobRow => {
    // The dataset may have changed since the request was checked: resolve every path once more.
    const changed = recheckPaths(train, config);
    if (changed.length > 0) throw new PathsChanged(changed);
    const id = randomUUID();
    const paths = jobPaths(config, id);
    const claim = store.insertIfIdle({
      id, request: train.request, requestHash: hash, idempotencyKey: key, admissionWarning,
      simulated: config.trainer.mode === "simulate", logPath: paths.log, now: now().toISOString(),
    });
    if (!claim.inserted) throw new BusyError(claim.activeId);
    try {
      const plan = buildLaunch(train, config, paths, deps.trainerCommand);
      mkdirSync(join(paths.dir, "tmp"), { recursive: true, mode: 0o750 });
      writeFileSync(paths.datasetConfig, plan.dataset_toml, { mode: 0o640 });
      mkdirSync(train.outputDir, { recursive: true, mode: 0o770 });
      const ctx = contextFor(id, train.request, train.outputFile, Date.now());
      const launchFile = { argv: plan.argv, env: plan.env, cwd: plan.cwd, log: paths.log, logMaxBytes: config.trainer.log_max_bytes };
      track(startRun(ctx, launchFile, deps.selfCommand));
      log.info("job started", { job_id: id, tier: train.request.tier, device_index: train.device.index, simulated: config.trainer.mode === "simulate" });
    } catch (err) {
      const error = `the trainer could not be started: ${(err as Error).message}`;
      store.finish(id, { status: "failed", error_code: "spawn_failed", error, exit_code: null, signal: null, forced_kill: false, lora_path: null, lora_sha256: null, lora_bytes: null }, now().toISOString());
      log.error("spawn failed", { job_id: id, error });
    }
    return store.get(id)!;
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
      try {
        return replayOf(hash, idempotencyKey) ?? { ok: true, job: launch(checked.value, hash, idempotencyKey, admission.warning) };
      } catch (err) {
        if (err instanceof BusyError) return { ok: false, kind: "busy", activeId: err.activeId };
        if (err instanceof PathsChanged) return { ok: false, kind: "invalid", detail: err.detail };
        throw err;
      }
    },

    // Answers once no process of the job is left, with the final record.
    async cancel(id: string): Promise<JobRow | null> {
      const row = store.get(id);
      if (!row) return null;
      const run = runs.get(id);
      if (!run) return row;
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

    // Re-adopts what survived a restart of the worker; fails what did not.
    reconcile(): void {
      reconcileOnStart({ store, now, log }, (row) => {
        const request = JSON.parse(row.request) as TrainRequest;
        const outputFile = join(request.output_dir, `${request.output_name}.safetensors`);
        const ctx = contextFor(row.id, request, outputFile, Date.parse(row.started_at ?? row.created_at));
        track(adoptRun(ctx, row));
      });
    },

    // Lets running jobs finish their bookkeeping; used by tests and orderly shutdown.
    async settle(): Promise<void> {
      await Promise.all([...runs.values()].map((r) => r.finished));
    },
  };
}

// Field order does not make two bodies different requests.
function requestHash(request: TrainRequest): string {
  const canonical = JSON.stringify(Object.fromEntries(Object.entries(request).sort(([a], [b]) => a.localeCompare(b))));
  return new Bun.CryptoHasher("sha256").update(canonical).digest("hex");
}

class PathsChanged extends Error {
  constructor(readonly detail: DetailItem[]) {
    super("request paths changed since they were checked");
  }
}

class BusyError extends Error {
  constructor(readonly activeId: string) {
    super(`job ${activeId} is active`);
  }
}
