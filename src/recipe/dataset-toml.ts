import { join } from "node:path";
import type { BucketLayout } from "../dataset/buckets.ts";
import { type RunTier, TIERS } from "../tiers.ts";
import type { CheckedTrain } from "../request/check.ts";
import { CAPTION_EXTENSION } from "../request/dataset.ts";

const MAX_BUCKET_RESO = 2048;
// sd-scripts' defaults, not written: config_util's min_bucket_reso and bucket_reso_steps.
const MIN_BUCKET_RESO = 256;
const BUCKET_RESO_STEPS = 64;

/** The buckets sd-scripts lays out for a tier's dataset (upscaling allowed: bucket_no_upscale stays off). */
export function bucketLayout(tier: RunTier): BucketLayout {
  return {
    resolution: TIERS[tier].resolution, minBucketReso: MIN_BUCKET_RESO, maxBucketReso: MAX_BUCKET_RESO,
    bucketResoSteps: BUCKET_RESO_STEPS,
  };
}

// Only the keys sd-scripts' config schema knows; Bun's TOML writer escapes every string.
// The images are read from the job's own copy (datasetCopy), never from the handoff folder. `repeatsScale`
// is 1 but for a resumed run (see resumeRepeatsScale).
export function datasetToml(train: CheckedTrain, datasetCopy: string, repeatsScale = 1): string {
  const { request } = train;
  const tier = TIERS[request.tier];
  const imageDir = snapshotImageDir(datasetCopy, train.dataset.folder);
  return Bun.TOML.stringify({
    general: { caption_extension: CAPTION_EXTENSION },
    datasets: [
      {
        resolution: tier.resolution,
        batch_size: tier.batchSize,
        enable_bucket: true,
        // sd-scripts' default of 1024 keeps a 2:3 portrait at 704x1024 in the quality tier (model_util's buckets);
        // 2048, as every kohya_ss SDXL preset sets, lets it reach SDXL's own 832x1216.
        max_bucket_reso: MAX_BUCKET_RESO,
        subsets: [
          {
            image_dir: imageDir,
            class_tokens: `${request.trigger} ${request.subject_class}`,
            num_repeats: request.repeats * repeatsScale,
          },
        ],
      },
    ],
  });
}

// The kohya folder keeps its name in the copy; images that lay directly in the dataset dir go to images/.
export function snapshotImageDir(datasetCopy: string, folder: string | null): string {
  return join(datasetCopy, folder ?? "images");
}

// sd-scripts resumes a state saved past the first epoch wrongly: with --skip_until_initial_step it sets
// global_step to the step's position within its epoch (train_network.py; sd-scripts#1999, PR#1406), so the run
// trains past max_train_steps on a schedule that has ended and names its files after the wrong steps. A resumed
// run is therefore given one epoch long enough for the whole run, by taking the repeats this many times: every
// image is still seen equally often, in a fresh order, and the step count, schedule and file names continue
// exactly. At least images x repeats x scale / batch >= max_train_steps batches make the epoch.
export function resumeRepeatsScale(images: number, repeats: number, batchSize: number, maxTrainSteps: number): number {
  return Math.max(1, Math.ceil((maxTrainSteps * batchSize) / (images * repeats)));
}
