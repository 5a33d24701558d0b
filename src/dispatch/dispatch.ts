import { randomUUID } from "node:crypto";
import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Config } from "../config/schema.ts";
import { type Admission, judgeAdmission, type AdmissionRefusal } from "../gpu/admission.ts";
import type { GpuProbe } from "../gpu/probe.ts";
import type { Logger } from "../logger.ts";
import { buildLaunch, type ResumeFrom } from "../recipe/command.ts";
import { resumeRepeatsScale } from "../recipe/dataset-toml.ts";
import { fail, ok, type Result } from "../result.ts";
import { BATCH_SIZE, TIERS } from "../tiers.ts";
import {
  type CheckedTrain, type TrainCheck, checkRequest, checkResume, checkTrain, recheckPaths,
} from "../request/check.ts";
import {
  type DetailItem,
  detailFromIssues,
  JobRequest,
  ResumeRequest,
  TrainRequest,
} from "../request/schema.ts";
import { type JobRow, type JobStore, StoreWriteFailed } from "../store/job-store.ts";
import { jobPaths } from "../supervisor/job-dir.ts";
import type { Backend } from "../supervisor/placement.ts";
import { PreparationCancelled, type Supervisor } from "../supervisor/supervisor.ts";
import {
  type PredecessorCopy, DatasetChanged, diskShortfall, type DiskShortfall, linkSnapshot, readCopy, type DatasetCopy,
  snapshotDataset,
} from "./dataset-copy.ts";
import { failedOutcome, isActive, type Outcome } from "../job.ts";
import { usableState } from "../supervisor/checkpoints.ts";
import { baseModelChange, type BaseModelPrint, baseModelPrint } from "../request/base-model.ts";
import { isStrictlyInside, realOrNull } from "../request/contained-path.ts";

export interface DispatcherDeps {
  store: JobStore;
  gpu: GpuProbe;
  config: Config;
  supervisor: Supervisor;
  backend: Backend;
  trainerCommand: string[];
  now: () => Date;
  log: Logger;
}

/** Why POST /train (or a resume) started no run: api/errors.ts turns each kind into its answer. */
export type DispatchRefusal =
  | { kind: "invalid"; detail: DetailItem[] }
  | { kind: "idempotency_mismatch"; detail: string }
  | { kind: "refused"; refusal: AdmissionRefusal }
  | { kind: "output_exists"; detail: string }
  | { kind: "output_in_use"; jobId: string; outputName: string }
  | { kind: "busy"; activeId: string; unsupervised: boolean; limit?: number }
  | { kind: "state_unwritable"; detail: string }
  | { kind: "insufficient_disk"; shortfall: DiskShortfall }
  | { kind: "not_resumable"; detail: string }
  | { kind: "base_model_changed"; detail: string }
  | { kind: "no_such_job" }
  | { kind: "slurm_refused"; detail: string }
  | { kind: "smoke_unavailable"; detail: string };

export type DispatchResult = Result<JobRow, DispatchRefusal>;

type Refused = { ok: false; error: DispatchRefusal };
type Resuming = Promise<DispatchResult>;

// How a job's first phase ended: what its dataset copy holds (null when it was known before: a resume's), or how
// the job ended before a trainer was started.
type Filled = Result<DatasetCopy | null, Outcome>;

// A cancel while the job prepared: no process of it ever existed.
const CANCELLED: Outcome = {
  status: "cancelled", exit_code: null, signal: null, forced_kill: false, error: null, error_code: null,
  lora_path: null, lora_sha256: null, lora_bytes: null,
};

// What a claim starts from: a fresh copy of arbo's dataset, or a resume of a predecessor's state on its copy.
interface Origin {
  // Known at the claim for a resume (its predecessor's copy); a fresh job's is recorded once `fill` copied it.
  dataset: DatasetCopy | null;
  // Fills the job directory's dataset, after the answer.
  fill: (id: string, signal: AbortSignal) => Promise<Filled>;
  // A resume's predecessor's preview images (JSON), which the run's strip goes on from.
  samples: string | null;
  resumes: { id: string; step: number; state: string; digest: string | null } | null;
  resume: ResumeFrom | null;
  // The base model as it was when the chain's first run started (JSON of BaseModelPrint).
  baseModelPrint: string | null;
}

export type Dispatcher = ReturnType<typeof createDispatcher>;

// POST /train from top to bottom: parse once → retry check → validate → refusals → claim → answer; then, after the
// answer, the job's preparing phase: the dataset copy → plan → start.
export function createDispatcher(deps: DispatcherDeps) {
  const { store, config, supervisor, backend, now, log } = deps;
  const { maxActive } = backend;
  // A replayed recording trains for its own number of steps, not the tier's.
  const replaying = config.trainer.mode === "simulate" && config.simulate.replay_log !== "";
  const expectedTotal = (request: JobRequest) => (replaying ? null : TIERS[request.tier].maxTrainSteps);

  // A fresh probe right before the spawn: a cached answer may predate the co-tenant's last model load.
  // A backend that places runs itself (Slurm) has GPUs this host's nvidia-smi says nothing about.
  const admit = async (train: CheckedTrain): Promise<Admission> => {
    if (config.gpu.admission === "off" || !backend.gpuAdmission) return ok(null);
    const probe = await deps.gpu.read({ fresh: true });
    return judgeAdmission(probe, train.device, train.request.tier, config, train.request.samples ?? 0);
  };

  // A retried dispatch (same Idempotency-Key, or the same body while that job runs) is the same job.
  const retryOf = (hash: string, key: string | null): DispatchResult | null => {
    const keyed = key === null ? null : store.byIdempotencyKey(key);
    if (keyed) {
      if (keyed.request_hash === hash) return ok(keyed);
      const detail = "this Idempotency-Key was already used with a different request body";
      return fail({ kind: "idempotency_mismatch", detail });
    }
    const active = key === null ? store.activeJobs().find((j) => j.request_hash === hash) : undefined;
    return active ? ok(active) : null;
  };

  // Synchronous from the check to the claim: no other dispatch can slip in between. The claimed row keeps the
  // slot while the launch runs.
  const claim = (
    id: string,
    train: CheckedTrain,
    hash: string,
    key: string | null,
    admissionWarning: string | null,
    origin: Origin,
  ): DispatchResult => {
    // The dataset may have changed since the request was checked: resolve every path once more.
    const changed = recheckPaths(train, config);
    if (changed.length > 0) return fail({ kind: "invalid", detail: changed });
    const full = supervisor.stateFull();
    if (full !== null) return fail({ kind: "state_unwritable", detail: full.error });
    const stray = supervisor.unsupervisedJob();
    if (stray !== null) return fail({ kind: "busy", activeId: stray, unsupervised: true });
    try {
      const claimed = store.insertIfIdle({
        id,
        request: train.request,
        requestHash: hash,
        idempotencyKey: key,
        admissionWarning,
        simulated: config.trainer.mode === "simulate",
        logPath: jobPaths(config.state_dir, id).log,
        now: now().toISOString(),
        totalSteps: expectedTotal(train.request),
        phase: "preparing",
        dataset: origin.dataset,
        outputFile: train.outputFile,
        resumes: origin.resumes,
        samples: origin.samples,
        baseModelPrint: origin.baseModelPrint,
        maxActive,
      });
      if (!claimed.ok) {
        const refusal = claimed.error;
        if ("resumedBy" in refusal) return alreadyResumed(origin.resumes?.id ?? "", refusal.resumedBy);
        if ("outputUser" in refusal) return outputInUse(refusal.outputUser, train);
        return busy(refusal.activeId);
      }
    } catch (err) {
      if (err instanceof StoreWriteFailed) return fail({ kind: "state_unwritable", detail: err.message });
      throw err;
    }
    return ok(store.get(id)!);
  };

  // The first phase of a fresh job, after its answer: the checked files copied into its job directory. A file
  // rewritten or swapped since the check, a cancel and a failing disk each end the job before any trainer starts.
  const copyDataset = async (id: string, train: CheckedTrain, signal: AbortSignal): Promise<Filled> => {
    try {
      return ok(await snapshotDataset(train.dataset, jobPaths(config.state_dir, id).dataset, signal));
    } catch (err) {
      if (err instanceof PreparationCancelled) return fail(CANCELLED);
      const at = `${train.request.dataset_dir}: `;
      if (err instanceof DatasetChanged) return fail(failedOutcome("dataset_changed", `${at}${err.message}`));
      const cause = err as NodeJS.ErrnoException;
      const error = `the dataset could not be copied into the job directory: ${cause.message}`;
      return fail(failedOutcome(cause.code === "ENOSPC" ? "disk_full" : "dataset_copy_failed", error));
    }
  };
  const freshOrigin = async (train: CheckedTrain): Promise<Result<Origin, DispatchRefusal>> => {
    const print = await baseModelPrint(train.baseModel);
    return ok({
      dataset: null, samples: null, resumes: null, resume: null, baseModelPrint: print && JSON.stringify(print),
      fill: (id, signal) => copyDataset(id, train, signal),
    });
  };
  // A resume reads its predecessor's copy through hard links: no byte is copied.
  const linkCopy = async (copy: PredecessorCopy, id: string): Promise<Filled> => {
    try {
      await linkSnapshot(copy.datasetDir, jobPaths(config.state_dir, id).dataset);
      return ok(null);
    } catch (err) {
      const why = (err as Error).message;
      return fail(failedOutcome("dataset_copy_failed", `the predecessor's dataset copy could not be linked: ${why}`));
    }
  };

  // Every slot taken: the first active job, for the answer to name.
  const busyWith = (): string | null => {
    const active = store.activeJobs();
    return active.length >= maxActive ? active[0]!.id : null;
  };
  const busy = (activeId: string): Refused =>
    fail({ kind: "busy", activeId, unsupervised: false, ...(maxActive > 1 ? { limit: maxActive } : {}) });
  const outputInUse = (jobId: string, train: CheckedTrain): Refused =>
    fail({ kind: "output_in_use", jobId, outputName: train.request.output_name });

  // What refuses a run whatever its dataset: decided before a byte of it is copied (the claim decides again).
  const refusedBeforeCopy = (train: CheckedTrain, datasetBytes: number): Refused | null => {
    const full = supervisor.stateFull();
    if (full !== null) return fail({ kind: "state_unwritable", detail: full.error });
    const stray = supervisor.unsupervisedJob();
    if (stray !== null) return fail({ kind: "busy", activeId: stray, unsupervised: true });
    const user = store.outputUser(train.outputFile);
    if (user !== null) return outputInUse(user, train);
    const holder = busyWith();
    if (holder !== null) return busy(holder);
    const tier = TIERS[train.request.tier];
    const shortfall = diskShortfall(config.state_dir, train.outputDir, tier, datasetBytes);
    return shortfall === null ? null : fail({ kind: "insufficient_disk", shortfall });
  };

  // A resumed job is continued by the newest job of its chain: the answer names that one and what can be done with it.
  const alreadyResumed = (id: string, by: string | null): Refused => {
    if (by === null) {
      const detail = `job ${id} cannot be resumed: retention is removing its job directory`;
      return fail({ kind: "not_resumable", detail });
    }
    let newest = store.get(by);
    while (newest?.resumed_by) newest = store.get(newest.resumed_by);
    const via = newest !== null && newest.id !== by ? `, continued by job ${newest.id}` : "";
    const detail = `job ${id} was already resumed by job ${by}${via}; ${nextFor(newest)}`;
    return fail({ kind: "not_resumable", detail });
  };
  const nextFor = (job: JobRow | null): string => {
    if (job === null) return "that job is not on record";
    if (isActive(job.status)) return `job ${job.id} is still ${job.status}`;
    if (job.status === "succeeded") return `job ${job.id} succeeded; there is nothing left to train`;
    if (job.resume_state !== null && job.pruned_at === null) return `resume job ${job.id} instead`;
    return `job ${job.id} ${job.status} and cannot be resumed either (${job.resume_gone ?? "it holds no saved state"})`;
  };

  const launch = async (row: JobRow, train: CheckedTrain, resume: ResumeFrom | null): Promise<void> => {
    const paths = jobPaths(config.state_dir, row.id);
    try {
      const placing = backend.launch(train.device);
      const plan = buildLaunch(train, config, paths, deps.trainerCommand, placing, resume);
      mkdirSync(join(paths.dir, "tmp"), { recursive: true, mode: 0o750 });
      writeFileSync(paths.datasetConfig, plan.dataset_toml, { mode: 0o640 });
      if (plan.sample_prompts !== undefined) writeFileSync(paths.samplePrompts, plan.sample_prompts, { mode: 0o640 });
      mkdirSync(paths.run, { mode: 0o750 });
      const launchFile = {
        argv: plan.argv,
        env: plan.env,
        cwd: plan.cwd,
        log: paths.log,
        logMaxBytes: config.trainer.log_max_bytes,
        inheritEnv: plan.inheritEnv,
        forwardSignals: placing.forwardSignals,
      };
      await supervisor.start(store.get(row.id) ?? row, train.outputFile, launchFile);
      log.info("job started", {
        job_id: row.id,
        tier: train.request.tier,
        device_index: train.device.index,
        simulated: config.trainer.mode === "simulate",
        ...(resume === null ? {} : { resumed_from: row.resumed_from, resume_step: resume.step }),
      });
    } catch (err) {
      await supervisor.recordSpawnFailure(row.id, `the trainer could not be started: ${(err as Error).message}`);
    }
  };

  // After the answer: the job directory filled (the dataset copied, or a predecessor's copy linked), then the
  // launch. The job ends here, before any trainer exists, when the fill fails or a cancel came first.
  const prepareAndLaunch = async (row: JobRow, train: CheckedTrain, origin: Origin, signal: AbortSignal) => {
    const filled = await origin.fill(row.id, signal);
    const cancelled = store.get(row.id)?.stop_reason != null;
    if (!filled.ok || cancelled) {
      rmSync(jobPaths(config.state_dir, row.id).dataset, { recursive: true, force: true });
      return filled.ok ? CANCELLED : filled.error;
    }
    // A record no longer active has nothing left to launch.
    if (!store.markPrepared(row.id, filled.value)) return null;
    await launch(row, train, origin.resume);
    return null;
  };

  // The same steps for a new train and a resume, from the checked request on: everything that can refuse (a retry
  // of a claimed job, the slot, the output, disk room, the GPU, Slurm, what the origin needs), then the claim, and
  // the answer. The job directory is filled and the run launched after it (supervisor.prepare).
  // `retried` finds a retry that claimed meanwhile.
  const start = async (
    checked: TrainCheck,
    retried: (hash: string) => DispatchResult | null,
    key: string | null,
    originOf: (train: CheckedTrain) => Promise<Result<Origin, DispatchRefusal>>,
  ): Promise<DispatchResult> => {
    if (!checked.ok) return checked;
    const train = checked.value;
    const hash = requestHash(train.request);
    const again = retried(hash);
    if (again) return again;
    const early = refusedBeforeCopy(train, train.resumed ? 0 : train.dataset.bytes);
    if (early !== null) return early;
    const admission = await admit(train);
    if (!admission.ok) return fail({ kind: "refused", refusal: admission.error });
    const refused = await backend.refusal(train.request);
    if (refused !== null) return fail({ kind: "slurm_refused", detail: `Slurm would not take the run: ${refused}` });
    const origin = await originOf(train);
    if (!origin.ok) return origin;
    const id = randomUUID();
    // A retry may have claimed meanwhile: asked again in the same tick as the claim.
    const claimed = retried(hash) ?? claim(id, train, hash, key, admission.value, origin.value);
    if (!claimed.ok || claimed.value.id !== id) return claimed;
    supervisor.prepare(id, (signal) => prepareAndLaunch(claimed.value, train, origin.value, signal));
    return claimed;
  };

  // A state in the worker's own tree, where it was verified; an older version saved states into output_dir.
  const ownedState = (state: string): boolean => {
    const [jobs, real] = [realOrNull(join(config.state_dir, "jobs")), realOrNull(state)];
    return jobs !== null && real !== null && isStrictlyInside(jobs, real);
  };
  // The run goes on from weights trained on the base model recorded at the chain's start: a file replaced since
  // would resume onto another model.
  const baseModelReplaced = async (job: JobRow, train: CheckedTrain): Promise<Refused | null> => {
    if (job.base_model_print === null) return null;
    const then = JSON.parse(job.base_model_print) as BaseModelPrint;
    const change = baseModelChange(then, await baseModelPrint(train.baseModel));
    if (change === null) return null;
    const detail = `job ${job.id} cannot be resumed: base_model_path ${train.request.base_model_path} is not the ` +
      `file the run started on (${change}); dispatch a new run instead`;
    return fail({ kind: "base_model_changed", detail });
  };

  // A resume continues a failed or cancelled job from its newest verified state, on its dataset copy.
  const resumable = async (job: JobRow): Promise<Result<ResumeFrom, DispatchRefusal>> => {
    const refuse = (why: string): Refused =>
      fail({ kind: "not_resumable", detail: `job ${job.id} cannot be resumed: ${why}` });
    if (job.resumed_by !== null) return alreadyResumed(job.id, job.resumed_by);
    if (isActive(job.status)) return refuse(`it is still ${job.status}; pause it first (POST /train/${job.id}/pause)`);
    if (job.status === "succeeded") return refuse("it succeeded; there is nothing left to train");
    if (job.pruned_at !== null) return refuse("its job directory (with its dataset copy) was pruned by retention");
    if (job.resume_state === null || job.resume_step === null) {
      const { tier } = JSON.parse(job.request) as JobRequest;
      const every = TIERS[tier].checkpointEvery;
      const why = `it saved no state before it ended (a ${tier} run saves one every ${every} steps)`;
      return refuse(job.resume_gone ?? why);
    }
    const at = `its saved state at step ${job.resume_step}`;
    if (!ownedState(job.resume_state) || job.resume_digest === null) {
      return refuse(`${at} lies outside the worker's run directories (an older version saved it into output_dir)`);
    }
    // Whole and finite again, and byte for byte the files that were verified.
    const usable = await usableState(job.resume_state, job.resume_step);
    if (!usable.ok) return refuse(`${at} can no longer be used: ${usable.error}`);
    if (usable.value !== job.resume_digest) return refuse(`${at} changed after the worker verified it`);
    return ok({ state: job.resume_state, step: job.resume_step, repeatsScale: 1 });
  };

  return {
    async dispatch(body: unknown, idempotencyKey: string | null = null): Promise<DispatchResult> {
      // Before the filesystem checks: a retry after success must not read as "output exists".
      const parsed = TrainRequest.safeParse(body);
      const earlier = parsed.success ? retryOf(requestHash(parsed.data), idempotencyKey) : null;
      if (earlier) return earlier;
      const checked = await checkTrain(body, config);
      return start(checked, (hash) => retryOf(hash, idempotencyKey), idempotencyKey, freshOrigin);
    },

    // A request the worker composed itself (a smoke run), through every step one from arbo takes.
    async dispatchComposed(request: JobRequest): Promise<DispatchResult> {
      return start(await checkRequest(request, config), (hash) => retryOf(hash, null), null, freshOrigin);
    },

    /** Whether a run could be claimed now, so a caller can refuse before it writes anything. */
    busyWith,

    // POST /train/{id}/resume: a retry (the same Idempotency-Key, or while the successor runs) is the same job.
    // `body` may ask for other previews than the predecessor's; nothing else of its request changes.
    async resume(predecessorId: string, idempotencyKey: string | null = null, body: unknown = {}): Resuming {
      const asked = ResumeRequest.safeParse(body);
      if (!asked.success) return fail({ kind: "invalid", detail: detailFromIssues(asked.error.issues, body) });
      const sameSamples = (row: JobRow) =>
        asked.data.samples === undefined || JobRequest.parse(JSON.parse(row.request)).samples === asked.data.samples;
      const retried = (): DispatchResult | null => {
        const keyed = idempotencyKey === null ? null : store.byIdempotencyKey(idempotencyKey);
        if (keyed) {
          if (keyed.resumed_from === predecessorId && sameSamples(keyed)) return ok(keyed);
          const detail = "this Idempotency-Key was already used for another request";
          return fail({ kind: "idempotency_mismatch", detail });
        }
        const successor = store.get(predecessorId)?.resumed_by ?? null;
        const running = successor === null ? null : store.get(successor);
        const same = running !== null && isActive(running.status) && idempotencyKey === null && sameSamples(running);
        return same ? ok(running) : null;
      };
      const job = store.get(predecessorId);
      if (!job) return fail({ kind: "no_such_job" });
      const earlier = retried();
      if (earlier) return earlier;
      const from = await resumable(job);
      if (!from.ok) return from;
      const copy = readCopy(jobPaths(config.state_dir, job.id).dataset);
      if (copy === null) {
        const detail = `job ${job.id} cannot be resumed: its dataset copy is missing from its job directory`;
        return fail({ kind: "not_resumable", detail });
      }
      const stored = JobRequest.parse(JSON.parse(job.request));
      const request = asked.data.samples === undefined ? stored : { ...stored, samples: asked.data.samples };
      const checked = await checkResume(request, copy, config);
      return start(checked, retried, idempotencyKey, async (train) => {
        const refused = await baseModelReplaced(job, train);
        if (refused !== null) return refused;
        const batch = BATCH_SIZE[train.device.class];
        const scale = resumeRepeatsScale(copy.images, request.repeats, batch, TIERS[request.tier].maxTrainSteps);
        return ok({
          dataset: { files: job.dataset_files ?? 0, bytes: job.dataset_bytes ?? 0, sha256: job.dataset_sha256 ?? "" },
          samples: job.samples,
          resumes: { id: job.id, step: from.value.step, state: from.value.state, digest: job.resume_digest },
          resume: { ...from.value, repeatsScale: scale },
          baseModelPrint: job.base_model_print,
          fill: (id) => linkCopy(copy, id),
        });
      });
    },
  };
}

// Field order does not make two bodies different requests.
function requestHash(request: JobRequest): string {
  const canonical = JSON.stringify(Object.fromEntries(Object.entries(request).sort(([a], [b]) => a.localeCompare(b))));
  return new Bun.CryptoHasher("sha256").update(canonical).digest("hex");
}
