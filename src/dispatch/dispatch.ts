import { randomUUID } from "node:crypto";
import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Config } from "../config/schema.ts";
import { type Admission, judgeAdmission, type Refusal } from "../gpu/admission.ts";
import type { GpuProbe } from "../gpu/probe.ts";
import type { Logger } from "../logger.ts";
import { buildLaunch } from "../recipe/command.ts";
import { TIERS } from "../tiers.ts";
import { type CheckedTrain, checkTrain, recheckPaths } from "../request/check.ts";
import { type DetailItem, fieldError, type TrainRequest, TrainRequest as TrainRequestSchema } from "../request/schema.ts";
import { type JobRow, type JobStore, StoreWriteFailed } from "../store/job-store.ts";
import { jobPaths } from "../supervisor/job-dir.ts";
import type { Supervisor } from "../supervisor/supervisor.ts";
import { DatasetChanged, type Snapshot, snapshotDataset } from "./snapshot.ts";

export interface DispatcherDeps {
  store: JobStore;
  gpu: GpuProbe;
  config: Config;
  supervisor: Supervisor;
  trainerCommand: string[];
  now: () => Date;
  log: Logger;
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

export type Dispatcher = ReturnType<typeof createDispatcher>;

// POST /train from top to bottom: parse once → replay check → validate → admission → claim → plan → start.
export function createDispatcher(deps: DispatcherDeps) {
  const { store, config, supervisor, now, log } = deps;
  // A replayed recording trains for its own number of steps, not the tier's.
  const expectedTotal = (request: TrainRequest) => (config.trainer.mode === "simulate" && config.simulate.replay_log !== "" ? null : TIERS[request.tier].maxTrainSteps);

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
  // slot while the launch runs.
  const claim = (id: string, train: CheckedTrain, hash: string, key: string | null, admissionWarning: string | null, dataset: Snapshot): DispatchResult => {
    // The dataset may have changed since the request was checked: resolve every path once more.
    const changed = recheckPaths(train, config);
    if (changed.length > 0) return { ok: false, kind: "invalid", detail: changed };
    const full = supervisor.stateFull();
    if (full !== null) return { ok: false, kind: "state_unwritable", detail: full.error };
    const stray = supervisor.unsupervisedJob();
    if (stray !== null) return { ok: false, kind: "busy", activeId: stray, unsupervised: true };
    try {
      const claimed = store.insertIfIdle({
        id, request: train.request, requestHash: hash, idempotencyKey: key, admissionWarning, simulated: config.trainer.mode === "simulate",
        logPath: jobPaths(config.state_dir, id).log, now: now().toISOString(), totalSteps: expectedTotal(train.request), dataset,
      });
      if (!claimed.inserted) return { ok: false, kind: "busy", activeId: claimed.activeId, unsupervised: false };
    } catch (err) {
      if (err instanceof StoreWriteFailed) return { ok: false, kind: "state_unwritable", detail: err.message };
      throw err;
    }
    return { ok: true, job: store.get(id)! };
  };

  // Before the claim, so a dataset that changed since the check is a 422 and any refusal leaves nothing behind.
  const copyDataset = async (id: string, train: CheckedTrain): Promise<{ ok: true; value: Snapshot } | Exclude<DispatchResult, { ok: true }>> => {
    const full = supervisor.stateFull();
    if (full !== null) return { ok: false, kind: "state_unwritable", detail: full.error };
    try {
      return { ok: true, value: await snapshotDataset(train.dataset, jobPaths(config.state_dir, id).dataset) };
    } catch (err) {
      removeJobDir(id);
      if (err instanceof DatasetChanged) {
        return { ok: false, kind: "invalid", detail: [fieldError("dataset_dir", `${train.request.dataset_dir}: ${err.message}; send the request again`, "path_changed")] };
      }
      return { ok: false, kind: "state_unwritable", detail: `the dataset could not be copied into the job directory: ${(err as Error).message}` };
    }
  };
  const removeJobDir = (id: string) => rmSync(jobPaths(config.state_dir, id).dir, { recursive: true, force: true });

  const launch = async (row: JobRow, train: CheckedTrain): Promise<DispatchResult> => {
    const paths = jobPaths(config.state_dir, row.id);
    try {
      const plan = buildLaunch(train, config, paths, deps.trainerCommand);
      mkdirSync(join(paths.dir, "tmp"), { recursive: true, mode: 0o750 });
      writeFileSync(paths.datasetConfig, plan.dataset_toml, { mode: 0o640 });
      mkdirSync(train.outputDir, { recursive: true, mode: 0o770 });
      await supervisor.start(row, train.outputFile, { argv: plan.argv, env: plan.env, cwd: plan.cwd, log: paths.log, logMaxBytes: config.trainer.log_max_bytes });
      log.info("job started", { job_id: row.id, tier: train.request.tier, device_index: train.device.index, simulated: config.trainer.mode === "simulate" });
      return { ok: true, job: store.get(row.id)! };
    } catch (err) {
      await supervisor.recordSpawnFailure(row.id, `the trainer could not be started: ${(err as Error).message}`);
      return { ok: false, kind: "launch_failed", job: store.get(row.id) ?? row };
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
      const id = randomUUID();
      const copied = await copyDataset(id, checked.value);
      if (!copied.ok) return copied;
      // A retry may have claimed while this one copied: asked again in the same tick as the claim.
      const claimed = replayOf(hash, idempotencyKey) ?? claim(id, checked.value, hash, idempotencyKey, admission.warning, copied.value);
      if (!claimed.ok || claimed.job.id !== id) {
        removeJobDir(id);
        return claimed;
      }
      return launch(claimed.job, checked.value);
    },
  };
}

// Field order does not make two bodies different requests.
function requestHash(request: TrainRequest): string {
  const canonical = JSON.stringify(Object.fromEntries(Object.entries(request).sort(([a], [b]) => a.localeCompare(b))));
  return new Bun.CryptoHasher("sha256").update(canonical).digest("hex");
}
