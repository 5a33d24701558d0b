// The stages of NetworkTrainer.train() before the first step, as far as the worker reads them: the dataset
// config and its images, the caching bars ("caching latents" starts the job's caching phase), --resume's state
// folder as accelerate 1.6.0's load_state and sd-scripts' load hook read it, and the "running training" block,
// whose total the worker reads. With --skip_until_initial_step sd-scripts skips whole epochs and restarts
// global_step at the steps left over, step mod batches per epoch (its issue #1999, unfixed while PR #1406 stays
// open): reproduced as it is, since the worker must live with it.
import { existsSync } from "node:fs";
import { readdir } from "node:fs/promises";
import { basename, extname, join } from "node:path";
import { z } from "zod";
import { readJsonOrNull, statOrNull } from "../fs.ts";
import { fail, ok, type Result } from "../result.ts";
import { MODEL_STATE, TORCH_ARCHIVES, TRAIN_STATE } from "./state-files.ts";
import { print, type Io, type Trainer } from "./io.ts";
import { pyStrRepr } from "./argv.ts";
import { tickThrough } from "./tqdm.ts";

export interface Dataset {
  batchSize: number;
  /** Images times repeats: what sd-scripts calls num_train_images. */
  trainImages: number;
  /** Every image read, by its path: latents are cached beside it. */
  imagePaths: string[];
  /** Caption tags counted per image dir's name, as sd-scripts writes them to ss_tag_frequency. */
  tagFrequency: Record<string, Record<string, number>>;
}

// The run as the loop and the LoRA's metadata know it before the first step.
export interface TrainingPlan {
  trainImages: number;
  batchesPerEpoch: number;
  epochs: number;
  totalSteps: number;
  tagFrequency: Dataset["tagFrequency"];
}

// The loop's first epoch (0-based) and global_step, which is also how many batches it skips in that epoch.
export type StartStep = { epoch: number; initialStep: number };

// sd-scripts' IMAGE_EXTENSIONS that the worker accepts, as glob_images finds them: "*" + each extension in lower or
// upper case, so never a hidden file nor "a.Png".
const IMAGE_FILE = /^[^.].*\.(?:png|jpe?g|webp|PNG|JPE?G|WEBP)$/;
const Size = z.number().int().positive();
const Subset = z.object({ image_dir: z.string(), num_repeats: Size.default(1), class_tokens: z.string().optional() });
const Resolution = z.union([Size, z.tuple([Size, Size])]);
const DatasetTable = z.object({ resolution: Resolution, batch_size: Size.default(1), subsets: z.array(Subset) });
const DatasetConfig = z.object({ datasets: z.array(DatasetTable).min(1) });
// What load_state opens; a state without its random states loads all the same.
const LOADED_FILES = [MODEL_STATE, ...TORCH_ARCHIVES.slice(0, -1)];
const NOT_FOUND = "FileNotFoundError: [Errno 2] No such file or directory:";
const STEPS_LEFT_ASSERTION =
  "AssertionError: max_train_steps should be greater than initial step / " +
  "max_train_stepsは初期ステップより大きい必要があります";

// The datasets, or the exception sd-scripts raises on the config. Captions are read here, as sd-scripts does.
export async function loadDatasets(path: string, captionExtension: string): Promise<Result<Dataset[]>> {
  const file = Bun.file(path);
  if (!(await file.exists())) return fail(`ValueError: file not found / ファイルが見つかりません: ${path}`);
  // The worker writes the config; one it cannot have written is refused in a line, as voluptuous would.
  const config = DatasetConfig.safeParse(await file.text().then(Bun.TOML.parse).catch(() => null));
  if (!config.success) return fail(`voluptuous.error.MultipleInvalid: ${config.error.issues[0]?.message}`);
  return ok(await Promise.all(config.data.datasets.map((d) => readDataset(d, captionExtension))));
}

// One bar per dataset, each taking a step's time (train_util.py new_cache_latents).
export async function cacheLatents({ io, args, knobs }: Trainer, datasets: Dataset[]): Promise<void> {
  for (const [index, { imagePaths }] of (args.cache_latents ? datasets : []).entries()) {
    print(io, `[Dataset ${index}]`);
    print(io, "caching latents with caching strategy.");
    print(io, "caching latents...");
    await tickThrough(io, imagePaths.length, knobs.secondsPerStep);
    // --cache_latents_to_disk: one .npz beside each image, where the next run would look for it.
    if (!args.cache_latents_to_disk) continue;
    await Promise.all(imagePaths.map((image) => Bun.write(`${stem(image)}.npz`, "simulated latents\n")));
  }
}

// With --cache_text_encoder_outputs: a quick look for caches on disk, then a bar that takes a step's time.
export async function cacheTextEncoderOutputs({ io, args, knobs }: Trainer, datasets: Dataset[]): Promise<void> {
  for (const [index, { imagePaths }] of (args.cache_text_encoder_outputs ? datasets : []).entries()) {
    print(io, `[Dataset ${index}]`);
    print(io, "caching Text Encoder outputs with caching strategy.");
    print(io, "checking cache validity...");
    await tickThrough(io, imagePaths.length, 0);
    print(io, "caching Text Encoder outputs...");
    await tickThrough(io, imagePaths.length, knobs.secondsPerStep);
  }
}

// What train_state.json records of a saved state (both 0 without one), or the exception loading the folder raises.
interface LoadedState {
  epoch: number;
  step: number;
}

// accelerate's load_state and sd-scripts' load hook, as they report a state they loaded.
export function announceResume(io: Io, dir: string, state: LoadedState): void {
  print(io, `resume training from local state: ${dir}`);
  print(io, `Loading states from ${dir}`);
  const saved = `{'current_epoch': ${state.epoch}, 'current_step': ${state.step}}`;
  print(io, `load train state from ${join(dir, TRAIN_STATE)}: ${saved}`);
  for (const what of ["model weights", "optimizer states", "scheduler states", "dataloader sampler states"]) {
    print(io, `All ${what} loaded successfully`);
  }
  print(io, "Loading in 0 custom states");
}

export function loadState(dir: string): Result<LoadedState> {
  if (!statOrNull(dir)?.isDirectory()) return fail(`ValueError: Tried to find ${dir} but folder does not exist`);
  const missing = LOADED_FILES.map((file) => join(dir, file)).find((path) => !existsSync(path));
  if (missing !== undefined) return fail(`${NOT_FOUND} ${pyStrRepr(missing)}`);
  const trainState = join(dir, TRAIN_STATE);
  if (!existsSync(trainState)) return ok({ epoch: 0, step: 0 });
  // load_model_hook: a KeyError for a file without a whole step in it.
  const saved = readJsonOrNull<{ current_epoch?: unknown; current_step?: unknown }>(trainState);
  const whole = (value: unknown): value is number => typeof value === "number" && Number.isInteger(value);
  if (!whole(saved?.current_step)) return fail("KeyError: 'current_step'");
  return ok({ epoch: whole(saved.current_epoch) ? saved.current_epoch : 0, step: saved.current_step });
}

// One bucket per dataset (the simulator does not look inside images), so every batch is full but the last.
export function announceTraining(io: Io, datasets: Dataset[], totalSteps: number): TrainingPlan {
  const batchesPerEpoch = datasets.reduce((sum, d) => sum + Math.ceil(d.trainImages / d.batchSize), 0);
  const trainImages = datasets.reduce((sum, d) => sum + d.trainImages, 0);
  const tagFrequency = Object.assign({}, ...datasets.map((d) => d.tagFrequency));
  print(io, "running training / 学習開始");
  print(io, `  total optimization steps / 学習ステップ数: ${totalSteps}`);
  return { trainImages, batchesPerEpoch, epochs: Math.ceil(totalSteps / batchesPerEpoch), totalSteps, tagFrequency };
}

// train_network.py's initial_step and epoch_to_start.
export function resumePoint(io: Io, plan: TrainingPlan, step: number, skip: boolean): Result<StartStep> {
  if (step <= 0) return ok({ epoch: 0, initialStep: 0 });
  if (plan.totalSteps <= step) return fail(`${STEPS_LEFT_ASSERTION}: ${plan.totalSteps} vs ${step}`);
  const epoch = Math.floor(step / plan.batchesPerEpoch);
  // Without --skip_until_initial_step only the epoch number moves on: global_step starts at 0 again.
  if (!skip) return ok({ epoch, initialStep: 0 });
  print(io, `skipping ${step} steps / ${step}ステップをスキップします`);
  return ok({ epoch, initialStep: step - epoch * plan.batchesPerEpoch });
}

async function readDataset(dataset: z.infer<typeof DatasetTable>, captionExtension: string): Promise<Dataset> {
  const listed = dataset.subsets.map(async (subset) => {
    const names = await readdir(subset.image_dir).catch(() => []);
    const images = names.filter((name) => IMAGE_FILE.test(name)).sort().map((name) => join(subset.image_dir, name));
    return { ...subset, images, tags: await countTags(images, captionExtension, subset.class_tokens ?? null) };
  });
  const subsets = await Promise.all(listed);
  return {
    batchSize: dataset.batch_size,
    trainImages: subsets.reduce((sum, subset) => sum + subset.images.length * subset.num_repeats, 0),
    imagePaths: subsets.flatMap((subset) => subset.images),
    tagFrequency: Object.fromEntries(subsets.map((subset) => [basename(subset.image_dir), subset.tags])),
  };
}

// As train_util.py's set_tag_frequency counts them: each image's caption (read_caption: the first line, stripped;
// the subset's class_tokens for an image without one) split at commas, each tag stripped and lowercased.
async function countTags(
  images: string[],
  captionExtension: string,
  classTokens: string | null,
): Promise<Record<string, number>> {
  const counts: Record<string, number> = {};
  for (const image of images) {
    const caption = (await readCaption(image, captionExtension)) ?? classTokens ?? "";
    const tags = caption.split(",").map((tag) => tag.trim().toLowerCase());
    for (const tag of tags.filter((t) => t !== "")) counts[tag] = (counts[tag] ?? 0) + 1;
  }
  return counts;
}

// read_caption tries the image's stem, then (five or more "_"-parts) the stem less its last four.
async function readCaption(image: string, captionExtension: string): Promise<string | null> {
  const parts = stem(image).split("_");
  const candidates = [stem(image), parts.length >= 5 ? parts.slice(0, -4).join("_") : stem(image)];
  for (const candidate of candidates) {
    const text = await Bun.file(candidate + captionExtension).text().catch(() => null);
    if (text !== null) return (text.split(/\r\n|\r|\n/)[0] ?? "").trim();
  }
  return null;
}

function stem(path: string): string {
  return path.slice(0, path.length - extname(path).length);
}
