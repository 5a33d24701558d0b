// The stages of NetworkTrainer.train() before the first step, as far as the worker reads them: the dataset
// config and its images, the base model, the caching bars ("caching latents" starts the job's caching
// phase) and the "running training" block, whose total the worker reads and a replay's LoRA metadata too.
import { readdir, stat } from "node:fs/promises";
import { z } from "zod";
import type { ScriptArgs } from "./argv.ts";
import { print, type Io, type Log } from "./io.ts";
import { traceback } from "./python.ts";
import { tickThrough } from "./tqdm.ts";
import type { TrainingPlan } from "./training-loop.ts";

export interface Dataset {
  resolution: [number, number];
  batchSize: number;
  images: number;
  // Images times repeats: what sd-scripts calls num_train_images.
  trainImages: number;
}

export type DatasetLoad = { ok: true; value: Dataset[] } | { ok: false; error: string };

// sd-scripts' IMAGE_EXTENSIONS that the worker accepts.
const IMAGE_FILE = /\.(png|jpe?g|webp)$/i;
const Size = z.number().int().positive();
const Subset = z.object({ image_dir: z.string(), num_repeats: Size.default(1) });
const Resolution = z.union([Size, z.tuple([Size, Size])]);
const DatasetTable = z.object({ resolution: Resolution, batch_size: Size.default(1), subsets: z.array(Subset) });
const DatasetConfig = z.object({ datasets: z.array(DatasetTable).min(1) });

// The datasets, or the exception sd-scripts raises on the config.
export async function loadDatasets(path: string): Promise<DatasetLoad> {
  const file = Bun.file(path);
  if (!(await file.exists())) return { ok: false, error: `ValueError: file not found / ファイルが見つかりません: ${path}` };
  let document: unknown;
  try {
    document = Bun.TOML.parse(await file.text());
  } catch (error) {
    return { ok: false, error: `toml.decoder.TomlDecodeError: ${(error as Error).message}` };
  }
  const config = DatasetConfig.safeParse(document);
  if (!config.success) {
    const issue = config.error.issues[0];
    const where = issue?.path.join(".");
    return { ok: false, error: `voluptuous.error.MultipleInvalid: ${issue?.message} @ data['${where}']` };
  }
  return { ok: true, value: await Promise.all(config.data.datasets.map(readDataset)) };
}

// False when loading failed, with the traceback on stderr. A path that is not a file goes to diffusers as a
// repo id, which an absolute path can never be.
export async function loadModel(io: Io, log: Log, modelPath: string, seconds: number): Promise<boolean> {
  if (!(await isFile(modelPath))) {
    const path = `pretrained_model_name_or_path "${modelPath}"`;
    const why = `${path} is neither a valid local path nor a valid repo id. Please check the parameter.`;
    io.stderr(traceback(`ValueError: The provided ${why}`));
    return false;
  }
  log("INFO", `load StableDiffusion checkpoint: ${modelPath}`);
  await io.sleep(seconds);
  return true;
}

// One bar per dataset and cache, each taking `seconds` (train_util.py new_cache_latents and friends).
export async function cacheInputs(io: Io, log: Log, datasets: Dataset[], args: ScriptArgs, seconds: number) {
  for (const dataset of args.cache_latents ? datasets : []) {
    log("INFO", "caching latents...");
    await tickThrough(io, dataset.images, seconds);
  }
  for (const dataset of args.cache_text_encoder_outputs ? datasets : []) {
    log("INFO", "caching Text Encoder outputs...");
    await tickThrough(io, Math.ceil(dataset.images / dataset.batchSize), seconds);
  }
}

export function announceTraining(io: Io, plan: TrainingPlan): void {
  print(io, "running training / 学習開始");
  print(io, `  num train images * repeats / 学習画像の数×繰り返し回数: ${plan.trainImages}`);
  print(io, `  num batches per epoch / 1epochのバッチ数: ${plan.batchesPerEpoch}`);
  print(io, `  num epochs / epoch数: ${plan.epochs}`);
  print(io, `  batch size per device / バッチサイズ: ${plan.batchSizes.join(", ")}`);
  print(io, `  total optimization steps / 学習ステップ数: ${plan.totalSteps}`);
}

async function readDataset(dataset: z.infer<typeof DatasetTable>): Promise<Dataset> {
  const counted = dataset.subsets.map(async (subset) => ({ ...subset, images: await imageCount(subset.image_dir) }));
  const subsets = await Promise.all(counted);
  const { resolution } = dataset;
  return {
    resolution: typeof resolution === "number" ? [resolution, resolution] : resolution,
    batchSize: dataset.batch_size,
    images: subsets.reduce((sum, subset) => sum + subset.images, 0),
    trainImages: subsets.reduce((sum, subset) => sum + subset.images * subset.num_repeats, 0),
  };
}

async function imageCount(dir: string): Promise<number> {
  try {
    return (await readdir(dir)).filter((name) => IMAGE_FILE.test(name)).length;
  } catch {
    return 0;
  }
}

async function isFile(path: string): Promise<boolean> {
  try {
    return (await stat(path)).isFile();
  } catch {
    return false;
  }
}
