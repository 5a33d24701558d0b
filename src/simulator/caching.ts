// sd-scripts caching VAE latents and text encoder outputs before training, one tqdm bar each
// (library/train_util.py new_cache_latents, new_cache_text_encoder_outputs).
import { imageCount } from "./dataset-report.ts";
import type { Dataset } from "./dataset.ts";
import type { Io } from "./io.ts";
import type { Log } from "./logger.ts";
import { tickThrough } from "./progress-bar.ts";

export interface Caching {
  io: Io;
  log: Log;
  datasets: Dataset[];
  latents: boolean;
  textEncoderOutputs: boolean;
  // How long each caching bar takes.
  seconds: number;
}

export async function cacheInputs(caching: Caching): Promise<void> {
  if (caching.latents) await cacheLatents(caching);
  if (caching.textEncoderOutputs) await cacheTextEncoderOutputs(caching);
}

async function cacheLatents({ io, log, datasets, seconds }: Caching): Promise<void> {
  for (const [index, dataset] of datasets.entries()) {
    log("INFO", `[Dataset ${index}]`);
    log("INFO", "caching latents with caching strategy.");
    log("INFO", "caching latents...");
    await tickThrough(io, "", imageCount(dataset), seconds);
  }
}

async function cacheTextEncoderOutputs({ io, log, datasets, seconds }: Caching): Promise<void> {
  log("INFO", "move vae and unet to cpu to save memory");
  for (const [index, dataset] of datasets.entries()) {
    const images = imageCount(dataset);
    log("INFO", `[Dataset ${index}]`);
    log("INFO", "caching Text Encoder outputs with caching strategy.");
    log("INFO", "checking cache validity...");
    await tickThrough(io, "", images, 0);
    log("INFO", "caching Text Encoder outputs...");
    await tickThrough(io, "", Math.ceil(images / dataset.batchSize), seconds);
  }
  log("INFO", "move vae and unet back to original device");
}
