// The stages of NetworkTrainer.train() before the first step, as far as the worker reads them: the dataset
// config and its images, the base model, the caching bars ("caching latents" starts the job's caching
// phase) and the "running training" block, whose total the worker reads and a replay's LoRA metadata too.
import { readdir, stat } from "node:fs/promises";
import { basename, extname, join } from "node:path";
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
  /** Every image read, by its path: latents are cached beside it. */
  imagePaths: string[];
  /** Caption tags counted per image dir's name, as sd-scripts writes them to ss_tag_frequency. */
  tagFrequency: Record<string, Record<string, number>>;
}

export type DatasetLoad = { ok: true; value: Dataset[] } | { ok: false; error: string };

// sd-scripts' IMAGE_EXTENSIONS that the worker accepts.
const IMAGE_FILE = /\.(png|jpe?g|webp)$/i;
const LATENT_PLACEHOLDER = "simulated latents\n";
const Size = z.number().int().positive();
const Subset = z.object({ image_dir: z.string(), num_repeats: Size.default(1) });
const Resolution = z.union([Size, z.tuple([Size, Size])]);
const DatasetTable = z.object({ resolution: Resolution, batch_size: Size.default(1), subsets: z.array(Subset) });
const DatasetConfig = z.object({ datasets: z.array(DatasetTable).min(1) });

// The datasets, or the exception sd-scripts raises on the config. Captions are read here, as sd-scripts does.
export async function loadDatasets(path: string, captionExtension: string): Promise<DatasetLoad> {
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
  return { ok: true, value: await Promise.all(config.data.datasets.map((d) => readDataset(d, captionExtension))) };
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
    // --cache_latents_to_disk: one .npz beside each image, where the next run would look for it.
    if (args.cache_latents_to_disk) await Promise.all(dataset.imagePaths.map((image) => Bun.write(`${stem(image)}.npz`, LATENT_PLACEHOLDER)));
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

async function readDataset(dataset: z.infer<typeof DatasetTable>, captionExtension: string): Promise<Dataset> {
  const listed = dataset.subsets.map(async (subset) => ({ ...subset, images: await imagesIn(subset.image_dir) }));
  const subsets = await Promise.all(listed);
  const tagFrequency: Record<string, Record<string, number>> = {};
  for (const subset of subsets) tagFrequency[basename(subset.image_dir)] = await countTags(subset.images, captionExtension);
  const { resolution } = dataset;
  return {
    resolution: typeof resolution === "number" ? [resolution, resolution] : resolution,
    batchSize: dataset.batch_size,
    images: subsets.reduce((sum, subset) => sum + subset.images.length, 0),
    trainImages: subsets.reduce((sum, subset) => sum + subset.images.length * subset.num_repeats, 0),
    imagePaths: subsets.flatMap((subset) => subset.images),
    tagFrequency,
  };
}

async function imagesIn(dir: string): Promise<string[]> {
  try {
    return (await readdir(dir)).filter((name) => IMAGE_FILE.test(name)).sort().map((name) => join(dir, name));
  } catch {
    return [];
  }
}

// A caption is comma-separated tags; a missing caption adds none.
async function countTags(images: string[], captionExtension: string): Promise<Record<string, number>> {
  const counts: Record<string, number> = {};
  for (const image of images) {
    const caption = Bun.file(stem(image) + captionExtension);
    if (!(await caption.exists())) continue;
    for (const tag of (await caption.text()).split(",").map((t) => t.trim()).filter((t) => t !== "")) counts[tag] = (counts[tag] ?? 0) + 1;
  }
  return counts;
}

function stem(path: string): string {
  return path.slice(0, path.length - extname(path).length);
}

async function isFile(path: string): Promise<boolean> {
  try {
    return (await stat(path)).isFile();
  } catch {
    return false;
  }
}
