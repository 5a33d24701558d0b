import { BATCH_SIZE, TIERS } from "../tiers.ts";
import { CAPTION_EXTENSION } from "./hyperparameters.ts";
import type { CheckedTrain } from "../request/check.ts";

// Only the keys sd-scripts' config schema knows; Bun's TOML writer escapes every string.
export function datasetToml(train: CheckedTrain): string {
  const { request, device, imageDir } = train;
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
