import { cancelledOutcome, failedOutcome, type Outcome, type Sample } from "../job.ts";
import type { ResumeFrom } from "../recipe/command.ts";
import { resumeRepeatsScale } from "../recipe/dataset-toml.ts";
import { baseModelPrint } from "../request/base-model.ts";
import type { CheckedTrain } from "../request/check.ts";
import { fail, ok, type Result } from "../result.ts";
import type { Job } from "../store/job-store.ts";
import { PreparationCancelled } from "../supervisor/supervisor.ts";
import { BATCH_SIZE, TIERS } from "../tiers.ts";
import {
  DatasetChanged, type DatasetCopy, linkSnapshot, type PredecessorCopy, snapshotDataset,
} from "./dataset-copy.ts";

// How a job's first phase ended: what its dataset copy holds (null when it was known before: a resume's), or how
// the job ended before a trainer was started.
type Filled = Result<DatasetCopy | null, Outcome>;

// What a claim starts from: a fresh copy of arbo's dataset, or a resume of a predecessor's state on its copy.
export interface Origin {
  // Known at the claim for a resume (its predecessor's copy); a fresh job's is recorded once `fill` copied it.
  dataset: DatasetCopy | null;
  // Fills the job directory's dataset (`dest`), after the answer.
  fill: (dest: string, signal: AbortSignal) => Promise<Filled>;
  // A resume's predecessor's preview images, which the run's strip goes on from.
  samples: Sample[] | null;
  resumes: { id: string; step: number; state: string; digest: string | null } | null;
  resume: ResumeFrom | null;
  // The base model as it was when the chain's first run started (JSON of BaseModelPrint).
  baseModelPrint: string | null;
}

// A fresh job's directory is filled with a copy of the checked files. A file rewritten or swapped since the
// check, a cancel and a failing disk each end the job before any trainer starts.
export async function freshOrigin(train: CheckedTrain): Promise<Origin> {
  const print = await baseModelPrint(train.baseModel);
  return {
    dataset: null, samples: null, resumes: null, resume: null, baseModelPrint: print && JSON.stringify(print),
    fill: (dest, signal) => copyDataset(dest, train, signal),
  };
}
async function copyDataset(dest: string, train: CheckedTrain, signal: AbortSignal): Promise<Filled> {
  try {
    return ok(await snapshotDataset(train.dataset, dest, signal));
  } catch (err) {
    if (err instanceof PreparationCancelled) return fail(cancelledOutcome());
    const at = `${train.request.dataset_dir}: `;
    if (err instanceof DatasetChanged) return fail(failedOutcome("dataset_changed", `${at}${err.message}`));
    const cause = err as NodeJS.ErrnoException;
    const error = `the dataset could not be copied into the job directory: ${cause.message}`;
    return fail(failedOutcome(cause.code === "ENOSPC" ? "disk_full" : "dataset_copy_failed", error));
  }
}
// A resume goes on from its predecessor's newest verified state, and reads its copy through hard links: no byte
// is copied.
export function resumeOrigin(job: Job, from: ResumeFrom, copy: PredecessorCopy, train: CheckedTrain): Origin {
  const { request } = train;
  const batch = BATCH_SIZE[train.device.class];
  const scale = resumeRepeatsScale(copy.images, request.repeats, batch, TIERS[request.tier].maxTrainSteps);
  return {
    dataset: { files: job.dataset_files ?? 0, bytes: job.dataset_bytes ?? 0, sha256: job.dataset_sha256 ?? "" },
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
