import { randomUUID } from "node:crypto";
import { join } from "node:path";
import { captionTokens } from "../dataset/clip-tokens.ts";
import { TOKENIZERS, tokenizerDir } from "../tokenizers/layout.ts";
import type { Config } from "../config/schema.ts";
import { type Admission, judgeAdmission } from "../gpu/admission.ts";
import type { GpuProbe } from "../gpu/probe.ts";
import { cancelledOutcome, failedOutcome, type Outcome } from "../job.ts";
import type { Logger } from "../logger.ts";
import { buildLaunch, type ResumeFrom } from "../recipe/command.ts";
import { type CheckedTrain, checkRequest, checkResume, parseTrain, recheckPaths } from "../request/check.ts";
import { detailFromIssues, type JobRequest, ResumeRequest } from "../request/schema.ts";
import { fail, ok, type Result } from "../result.ts";
import { type Job, type JobStore, StoreWriteFailed } from "../store/job-store.ts";
import type { StateHealth } from "../store/state-health.ts";
import type { JobDirs } from "../job-dir/job-dir.ts";
import type { Backend } from "../supervisor/placement.ts";
import type { Supervisor } from "../supervisor/supervisor.ts";
import { TIERS } from "../tiers.ts";
import type { Trainer } from "../trainer/trainer.ts";
import { readCopy } from "./dataset-copy.ts";
import { diskShortfall } from "./disk.ts";
import { freshOrigin, type Origin, resumeOrigin } from "./origin.ts";
import type { DispatchRefusal, DispatchResult, Refused } from "./refusal.ts";
import { createResumeChecks } from "./resume.ts";

interface DispatcherDeps {
  store: JobStore;
  gpu: GpuProbe;
  config: Config;
  // Holds a claimed job's preparing phase and follows the run it launches.
  supervisor: Supervisor;
  backend: Backend;
  dirs: JobDirs;
  // Whether the state dir can take a claim.
  stateHealth: StateHealth;
  // The jobs whose marker some process on this host carries (os/proc's markedProcesses).
  markedJobs: () => Iterable<string>;
  // What runs as the trainer, described once at start-up.
  trainer: Trainer;
  now: () => Date;
  log: Logger;
}

export type Dispatcher = ReturnType<typeof createDispatcher>;

const OTHER_BODY = "this Idempotency-Key was already used with a different request body";
const OTHER_REQUEST = "this Idempotency-Key was already used for another request";

// POST /train and POST /train/{id}/resume, each a straight pipeline (dispatchRequest and resume, at the bottom):
// parse → retry → check → admit → origin → claim → answer; after the answer, the job's preparing phase (its dataset
// copied or linked, then the launch) is held by the supervisor. The steps come first, in that order.
export function createDispatcher(deps: DispatcherDeps) {
  const { store, config, supervisor, backend, trainer, now, log } = deps;
  const { maxActive } = backend;
  const dirOf = (id: string) => deps.dirs.of(id);
  const { alreadyResumed, baseModelReplaced, resumable } = createResumeChecks(store, config.state_dir);
  // Read for each job: `tokenizers import` may have run since the worker started.
  const captionTokensOf = () => captionTokens(join(tokenizerDir(config), TOKENIZERS[0]!.folder));

  // A retried request is the same job: the one its Idempotency-Key claimed (if it asked the same), or without a key
  // an active job that asks the same.
  const retryOf = (key: string | null, same: (job: Job) => boolean, mismatch: string): DispatchResult | null => {
    if (key === null) {
      const active = store.activeJobs().find(same);
      return active ? ok(active) : null;
    }
    const keyed = store.byIdempotencyKey(key);
    if (keyed === null) return null;
    return same(keyed) ? ok(keyed) : fail({ kind: "idempotency_mismatch", detail: mismatch });
  };

  // A process of a job of this state dir that no run of ours follows: it may hold the GPU, so nothing starts.
  const unsupervised = (): string | null => {
    for (const id of deps.markedJobs()) if (!supervisor.follows(id) && dirOf(id).exists()) return id;
    return null;
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

  // Whatever its origin, a run is admitted (with admission's warning, if any) before anything is recorded, or
  // refused: the state dir, a stray, the output, the slot (the claim decides it again), room on disk for
  // `datasetBytes` more, the GPU, the backend.
  const admit = async (train: CheckedTrain, datasetBytes: number): Promise<Result<string | null, DispatchRefusal>> => {
    const full = deps.stateHealth.full();
    if (full !== null) return fail({ kind: "state_unwritable", detail: full.error });
    const stray = unsupervised();
    if (stray !== null) return fail({ kind: "busy", activeId: stray, unsupervised: true });
    const user = store.outputUser(train.outputFile);
    if (user !== null) return outputInUse(user, train);
    const holder = busyWith();
    if (holder !== null) return busy(holder);
    const shortfall = diskShortfall(config.state_dir, train.outputDir, TIERS[train.request.tier], datasetBytes);
    if (shortfall !== null) return fail({ kind: "insufficient_disk", shortfall });
    const admission = await judgeGpu(train);
    if (!admission.ok) return fail({ kind: "refused", refusal: admission.error });
    const refused = await backend.refusal(train.request);
    if (refused !== null) return fail({ kind: "slurm_refused", detail: `Slurm would not take the run: ${refused}` });
    return ok(admission.value);
  };
  // A fresh probe right before the claim: a cached answer may predate the co-tenant's last model load. A backend
  // that places runs itself (Slurm) has GPUs this host's nvidia-smi says nothing about.
  const judgeGpu = async (train: CheckedTrain): Promise<Admission> => {
    if (config.gpu.admission === "off" || !backend.gpuAdmission) return ok(null);
    const probe = await deps.gpu.read({ fresh: true });
    return judgeAdmission(probe, train.device, train.request.tier, config, train.request.samples ?? 0);
  };

  // Synchronous from the last look to the insert, so no other request slips in between; a retry that claimed
  // meanwhile is that job. The claimed job keeps the slot while it is prepared, and is answered at once.
  const claim = (train: CheckedTrain, origin: Origin, claimant: Claimant): DispatchResult => {
    const again = claimant.retry();
    if (again) return again;
    // The dataset may have changed since the request was checked: resolve every path once more.
    const changed = recheckPaths(train, config);
    if (changed.length > 0) return fail({ kind: "invalid", detail: changed });
    const full = deps.stateHealth.full();
    if (full !== null) return fail({ kind: "state_unwritable", detail: full.error });
    const stray = unsupervised();
    if (stray !== null) return fail({ kind: "busy", activeId: stray, unsupervised: true });
    const id = randomUUID();
    try {
      const claimed = store.insertIfIdle({
        id,
        request: train.request,
        requestHash: requestHash(train.request),
        idempotencyKey: claimant.key,
        admissionWarning: claimant.admissionWarning,
        simulated: trainer.simulated,
        logPath: dirOf(id).log,
        now: now().toISOString(),
        totalSteps: trainer.expectedTotal(train.request.tier),
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
    const row = store.get(id)!;
    supervisor.prepare(id, (signal) => prepare(row, train, origin, signal));
    return ok(row);
  };

  // The preparing phase, after the answer: the job directory created and filled (the dataset copied, or a
  // predecessor's copy linked), then the launch. The job ends here, before any trainer exists, when the fill or the
  // launch fails or a cancel came first: it trained nothing, and its directory goes whole.
  const prepare = async (row: Job, train: CheckedTrain, origin: Origin, signal: AbortSignal) => {
    const dir = dirOf(row.id);
    dir.create();
    const ended = await fillAndLaunch(row, train, origin, signal).catch(async (err: unknown) => {
      await dir.remove();
      throw err;
    });
    if (ended !== null) await dir.remove();
    return ended;
  };
  const fillAndLaunch = async (row: Job, train: CheckedTrain, origin: Origin, signal: AbortSignal) => {
    const filled = await origin.fill(dirOf(row.id).dataset, signal);
    const cancelled = store.get(row.id)?.stop_reason != null;
    if (!filled.ok || cancelled) return filled.ok ? cancelledOutcome() : filled.error;
    // A record no longer active has nothing left to launch.
    if (!store.markPrepared(row.id, filled.value)) return null;
    return launch(row, train, origin.resume);
  };
  // A refusal may be the mark of the very job this request retries, claimed while it was being checked (its output
  // in use, the slot taken, the state resumed): that job is the answer.
  const unlessRetried = (result: DispatchResult, retry: () => DispatchResult | null): DispatchResult =>
    result.ok ? result : (retry() ?? result);

  const launch = async (row: Job, train: CheckedTrain, resume: ResumeFrom | null): Promise<Outcome | null> => {
    const dir = dirOf(row.id);
    try {
      const placing = backend.launch(train.device);
      const plan = buildLaunch(train, config, dir, trainer, placing, resume);
      dir.writeRecipe({ datasetToml: plan.dataset_toml, samplePrompts: plan.sample_prompts });
      const launchFile = {
        argv: plan.argv,
        env: plan.env,
        cwd: plan.cwd,
        log: dir.log,
        logMaxBytes: config.trainer.log_max_bytes,
        inheritEnv: plan.inheritEnv,
        forwardSignals: placing.forwardSignals,
      };
      await supervisor.start(store.get(row.id) ?? row, train.outputFile, launchFile);
    } catch (err) {
      const error = `the trainer could not be started: ${(err as Error).message}`;
      log.error("spawn failed", { job_id: row.id, error });
      return failedOutcome("spawn_failed", error);
    }
    log.info("job started", {
      job_id: row.id,
      tier: train.request.tier,
      device_index: train.device.index,
      simulated: trainer.simulated,
      ...(resume === null ? {} : { resumed_from: row.resumed_from, resume_step: resume.step }),
    });
    return null;
  };

  // A request parsed once, from a body or composed by the worker: retry → check → refusals → origin → claim.
  const dispatchRequest = async (request: JobRequest, key: string | null): Promise<DispatchResult> => {
    const hash = requestHash(request);
    const retry = () => retryOf(key, (job) => job.request_hash === hash, OTHER_BODY);
    // Before the filesystem checks: a retry after success must not read as "output exists".
    const earlier = retry();
    if (earlier) return earlier;
    return unlessRetried(await dispatchFresh(request, key, retry), retry);
  };
  // A request's own steps, after its retry check.
  const dispatchFresh = async (
    request: JobRequest, key: string | null, retry: () => DispatchResult | null,
  ): Promise<DispatchResult> => {
    const checked = await checkRequest(request, config);
    if (!checked.ok) return checked;
    const train = checked.value;
    const admitted = await admit(train, train.dataset.bytes);
    if (!admitted.ok) return admitted;
    const origin = await freshOrigin(train, captionTokensOf);
    return claim(train, origin, { key, retry, admissionWarning: admitted.value });
  };

  // A resume's own steps, after its retry check: resumable → its copy → check → refusals → claim.
  const resumeFresh = async (
    job: Job, samplesAsked: number | undefined, key: string | null, retry: () => DispatchResult | null,
  ): Promise<DispatchResult> => {
    const from = await resumable(job);
    if (!from.ok) return from;
    const copy = readCopy(dirOf(job.id).dataset);
    if (copy === null) {
      const detail = `job ${job.id} cannot be resumed: its dataset copy is missing from its job directory`;
      return fail({ kind: "not_resumable", detail });
    }
    const request = samplesAsked === undefined ? job.request : { ...job.request, samples: samplesAsked };
    const checked = await checkResume(request, copy, config);
    if (!checked.ok) return checked;
    const train = checked.value;
    const admitted = await admit(train, 0);
    if (!admitted.ok) return admitted;
    const replaced = await baseModelReplaced(job, train);
    if (replaced !== null) return replaced;
    return claim(train, resumeOrigin(job, from.value, copy, train), { key, retry, admissionWarning: admitted.value });
  };

  return {
    async dispatch(body: unknown, idempotencyKey: string | null = null): Promise<DispatchResult> {
      const parsed = parseTrain(body);
      return parsed.ok ? dispatchRequest(parsed.value, idempotencyKey) : parsed;
    },

    // A request the worker composed itself (a smoke run), through every step one from arbo takes.
    dispatchComposed: (request: JobRequest): Promise<DispatchResult> => dispatchRequest(request, null),

    /** Whether a run could be claimed now, so a caller can refuse before it writes anything. */
    busyWith,

    // POST /train/{id}/resume: a retry (the same Idempotency-Key, or while the successor runs) is the same job.
    // `body` may ask for other previews than the predecessor's; nothing else of its request changes.
    async resume(predecessorId: string, key: string | null = null, body: unknown = {}): Promise<DispatchResult> {
      const asked = ResumeRequest.safeParse(body);
      if (!asked.success) return fail({ kind: "invalid", detail: detailFromIssues(asked.error.issues, body) });
      const job = store.get(predecessorId);
      if (!job) return fail({ kind: "no_such_job" });
      const samplesAsked = asked.data.samples;
      const sameSamples = (row: Job) => samplesAsked === undefined || row.request.samples === samplesAsked;
      const retry = () => retryOf(key, (row) => row.resumed_from === predecessorId && sameSamples(row), OTHER_REQUEST);
      const earlier = retry();
      if (earlier) return earlier;
      return unlessRetried(await resumeFresh(job, samplesAsked, key, retry), retry);
    },
  };
}

// Who claims: the request's Idempotency-Key, how to find a retry of it, and what admission warned of.
interface Claimant {
  key: string | null;
  retry: () => DispatchResult | null;
  admissionWarning: string | null;
}

// Field order does not make two bodies different requests.
function requestHash(request: JobRequest): string {
  const canonical = JSON.stringify(Object.fromEntries(Object.entries(request).sort(([a], [b]) => a.localeCompare(b))));
  return new Bun.CryptoHasher("sha256").update(canonical).digest("hex");
}
