import { join } from "node:path";
import { BATCH_SIZE, TIERS } from "../tiers.ts";
import type { CheckedTrain } from "../request/check.ts";
import { CAPTION_EXTENSION } from "../request/dataset.ts";

// Only the keys sd-scripts' config schema knows; Bun's TOML writer escapes every string.
// The images are read from the job's own copy (datasetCopy), never from the handoff folder.
export function datasetToml(train: CheckedTrain, datasetCopy: string): string {
  const { request, device } = train;
  const imageDir = snapshotImageDir(datasetCopy, train.dataset.folder);
  return Bun.TOML.stringify({
    general: { caption_extension: CAPTION_EXTENSION },
    datasets: [
      {
        resolution: TIERS[request.tier].resolution,
        batch_size: BATCH_SIZE[device.class],
        enable_bucket: true,
        subsets: [
          {
            image_dir: imageDir,
            class_tokens: `${request.trigger} ${request.subject_class}`,
            num_repeats: request.repeats,
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
