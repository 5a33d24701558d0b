// What sd-scripts logs while it builds the dataset group and its buckets (library/train_util.py).
import type { Dataset, Subset } from "./dataset.ts";
import type { Io } from "./io.ts";
import type { Log } from "./logger.ts";
import { tickThrough } from "./progress-bar.ts";

export async function reportDatasets(io: Io, log: Log, datasets: Dataset[], seconds: number): Promise<void> {
  for (const dataset of datasets) reportImages(log, dataset);
  for (const [index, dataset] of datasets.entries()) {
    log("INFO", `[Dataset ${index}]`);
    log("INFO", "loading image sizes.");
    await tickThrough(io, "", imageCount(dataset), seconds);
    reportBuckets(log, dataset);
  }
}

export function imageCount(dataset: Dataset): number {
  return dataset.subsets.reduce((sum, subset) => sum + subset.images, 0);
}

function reportImages(log: Log, dataset: Dataset): void {
  log("INFO", "prepare images.");
  for (const subset of dataset.subsets) reportSubset(log, subset);
  log("INFO", `${dataset.trainImages} train images with repeating.`);
  log("INFO", "0 reg images.");
  log("WARNING", "no regularization images / 正則化画像が見つかりませんでした");
}

function reportSubset(log: Log, subset: Subset): void {
  if (subset.state === "not_directory") log("WARNING", `not directory: ${subset.imageDir}`);
  else log("INFO", `found directory ${subset.imageDir} contains ${subset.images} image files`);
  if (subset.state !== "found") {
    log("WARNING", `ignore subset with image_dir='${subset.imageDir}': no images found / 画像が見つからないためサブセットを無視します`);
  }
}

// The simulator puts every image in the dataset's own resolution: one bucket, no aspect error.
function reportBuckets(log: Log, dataset: Dataset): void {
  log("INFO", "make buckets");
  log("INFO", "number of images (including repeats) / 各bucketの画像枚数（繰り返し回数を含む）");
  const [width, height] = dataset.resolution;
  if (dataset.trainImages > 0) log("INFO", `bucket 0: resolution (${width}, ${height}), count: ${dataset.trainImages}`);
  log("INFO", `mean ar error (without repeats): ${dataset.trainImages > 0 ? "0.0" : "nan"}`);
}
