import { cancelledOutcome, type DatasetIdentity, failedOutcome, type Outcome, type Sample } from "../job.ts";
import type { ResumeFrom } from "../recipe/command.ts";
import { bucketLayout, resumeRepeatsScale, snapshotImageDir } from "../recipe/dataset-toml.ts";
import { DatasetInvalid, prepareCopy } from "../dataset/prepare.ts";
import type { CaptionTokens } from "../dataset/clip-tokens.ts";
import { type BaseModelPrint, baseModelPrint } from "../request/base-model.ts";
import type { CheckedTrain } from "../request/check.ts";
import { fail, ok, type Result } from "../result.ts";
import type { DatasetOnRecord, Job } from "../store/job-store.ts";
import { PreparationCancelled } from "../supervisor/index.ts";
import { TIERS } from "../tiers.ts";
import { identityOfPhotos } from "../likeness/dataset-identity.ts";
import type { Scorer } from "../likeness/scorer.ts";
import { isImage } from "../request/dataset.ts";
import { readdir } from "node:fs/promises";
import { join } from "node:path";
import {
  DatasetChanged, linkSnapshot, type PredecessorCopy, snapshotDataset,
} from "./dataset-copy.ts";

// How a job's first phase ended: what its dataset copy holds and what preparing it did (null when it was known
// before: a resume's), or how the job ended before a trainer was started.
type Filled = Result<DatasetOnRecord | null, Outcome>;

// What a claim starts from: a fresh copy of arbo's dataset, or a resume of a predecessor's state on its copy.
export interface Origin {
  /** Known at the claim for a resume (its predecessor's copy); a fresh job's is recorded once `fill` copied it. */
  dataset: DatasetOnRecord | null;
  /** Fills the job directory's dataset (`dest`), after the answer. */
  fill: (dest: string, signal: AbortSignal) => Promise<Filled>;
  /** A resume's predecessor's preview images, which the run's strip goes on from. */
  samples: Sample[] | null;
  resumes: { id: string; step: number; state: string; digest: string | null } | null;
  resume: ResumeFrom | null;
  /** The base model as it was when the chain's first run started. */
  baseModelPrint: BaseModelPrint | null;
}

// A fresh job's directory is filled with a copy of the checked files, then the copy is made ready for the trainer
// (dataset/prepare.ts: upright images, the trigger in every caption). A file rewritten or swapped since the check,
// one the trainer could not read, a cancel and a failing disk each end the job before any trainer starts.
// `tokens` counts a caption's tokens as the trainer's tokenizer will.
// `scorer` then scores the copy's photos for the dataset's identity (SPEC §8), unless the request asked it not to
// or it is `known` (scored before the claim: identity_check "refuse").
export async function freshOrigin(
  train: CheckedTrain, tokens: () => CaptionTokens, scorer: Scorer | null, known: DatasetIdentity | null,
): Promise<Origin> {
  return {
    dataset: null, samples: null, resumes: null, resume: null, baseModelPrint: await baseModelPrint(train.baseModel),
    fill: (dest, signal) => copyDataset(dest, train, tokens, { scorer, known }, signal),
  };
}
async function copyDataset(
  dest: string,
  train: CheckedTrain,
  tokens: () => CaptionTokens,
  faces: { scorer: Scorer | null; known: DatasetIdentity | null },
  signal: AbortSignal,
): Promise<Filled> {
  const { request, dataset } = train;
  try {
    const copy = await snapshotDataset(dataset, dest, signal);
    const shownAs = (name: string) => (dataset.folder === null ? name : `${dataset.folder}/${name}`);
    const target = {
      trigger: request.trigger, subjectClass: request.subject_class, buckets: bucketLayout(request.tier),
      folder: dataset.folder, tokens: tokens(),
    };
    const imageDir = snapshotImageDir(dest, dataset.folder);
    const report = await prepareCopy(imageDir, shownAs, target, signal);
    if (request.identity_check === "off") return ok({ ...copy, report });
    const identity = faces.known ?? await identityOfCopy(faces.scorer, imageDir, shownAs);
    signal.throwIfAborted();
    return ok({ ...copy, report: { ...report, identity } });
  } catch (err) {
    if (err instanceof PreparationCancelled) return fail(cancelledOutcome());
    const at = `${train.request.dataset_dir}: `;
    if (err instanceof DatasetChanged) return fail(failedOutcome("dataset_changed", `${at}${err.message}`));
    if (err instanceof DatasetInvalid) return fail(failedOutcome("dataset_invalid", `${at}${err.message}`));
    const cause = err as NodeJS.ErrnoException;
    const error = `the dataset could not be copied into the job directory: ${cause.message}`;
    return fail(failedOutcome(cause.code === "ENOSPC" ? "disk_full" : "dataset_copy_failed", error));
  }
}
// The copy's photos scored (upright, as the trainer reads them), named as they lie in arbo's dataset dir.
async function identityOfCopy(scorer: Scorer | null, imageDir: string, shownAs: (name: string) => string) {
  const images = (await readdir(imageDir)).filter(isImage).sort();
  return identityOfPhotos(scorer, images.map((name) => join(imageDir, name)), images.map(shownAs));
}

// A resume goes on from its predecessor's newest verified state, and reads its copy through hard links: no byte
// is copied.
export function resumeOrigin(job: Job, from: ResumeFrom, copy: PredecessorCopy, train: CheckedTrain): Origin {
  const { request } = train;
  const tier = TIERS[request.tier];
  const scale = resumeRepeatsScale(copy.images, request.repeats, tier.batchSize, tier.maxTrainSteps);
  return {
    dataset: {
      files: job.dataset_files ?? 0, bytes: job.dataset_bytes ?? 0, sha256: job.dataset_sha256 ?? "",
      report: job.dataset_report,
    },
    samples: job.samples,
    resumes: { id: job.id, step: from.step, state: from.state, digest: job.resume_digest },
    resume: { ...from, repeatsScale: scale },
    baseModelPrint: job.base_model_print,
    fill: (dest) => linkCopy(copy, dest),
  };
}
async function linkCopy(copy: PredecessorCopy, dest: string): Promise<Filled> {
  try {
    await linkSnapshot(copy.datasetDir, dest);
    return ok(null);
  } catch (err) {
    const why = (err as Error).message;
    return fail(failedOutcome("dataset_copy_failed", `the predecessor's dataset copy could not be linked: ${why}`));
  }
}
