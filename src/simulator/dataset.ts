// The --dataset_config TOML as sd-scripts reads it (`[general]`, `[[datasets]]`,
// `[[datasets.subsets]]`), and the images each subset would train on.
import { readdir } from "node:fs/promises";
import { z } from "zod";

export type SubsetState = "found" | "empty" | "not_directory";

export interface Subset {
  imageDir: string;
  images: number;
  repeats: number;
  state: SubsetState;
}

export interface Dataset {
  resolution: [number, number];
  batchSize: number;
  subsets: Subset[];
  // Images times repeats: what sd-scripts calls num_train_images.
  trainImages: number;
}

// sd-scripts logs `log` (when present) and then raises `exception`.
export type DatasetLoad = { ok: true; datasets: Dataset[] } | { ok: false; log: string | null; exception: string };

// sd-scripts' IMAGE_EXTENSIONS that the worker accepts.
const IMAGE_FILE = /\.(png|jpe?g|webp)$/i;

const Size = z.number().int().positive();
const DatasetConfig = z.object({
  general: z.object({ caption_extension: z.string().optional() }).optional(),
  datasets: z
    .array(
      z.object({
        resolution: z.union([Size, z.tuple([Size, Size])]),
        batch_size: Size.default(1),
        enable_bucket: z.boolean().default(false),
        subsets: z.array(z.object({ image_dir: z.string(), class_tokens: z.string().optional(), num_repeats: Size.default(1) })),
      }),
    )
    .min(1),
});

export async function loadDatasets(path: string): Promise<DatasetLoad> {
  const file = Bun.file(path);
  if (!(await file.exists())) return { ok: false, log: null, exception: `ValueError: file not found / ファイルが見つかりません: ${path}` };
  let document: unknown;
  try {
    document = Bun.TOML.parse(await file.text());
  } catch (error) {
    const log = `Error on parsing TOML config file. Please check the format. / TOML 形式の設定ファイルの読み込みに失敗しました。文法が正しいか確認してください。: ${path}`;
    return { ok: false, log, exception: `toml.decoder.TomlDecodeError: ${(error as Error).message}` };
  }
  const config = DatasetConfig.safeParse(document);
  if (!config.success) {
    const issue = config.error.issues[0];
    const where = issue?.path.join(".") ?? "";
    return { ok: false, log: "Invalid user config / ユーザ設定の形式が正しくないようです", exception: `voluptuous.error.MultipleInvalid: ${issue?.message} @ data['${where}']` };
  }
  return { ok: true, datasets: await Promise.all(config.data.datasets.map(readDataset)) };
}

async function readDataset(dataset: z.infer<typeof DatasetConfig>["datasets"][number]): Promise<Dataset> {
  const subsets = await Promise.all(dataset.subsets.map(async (subset) => countSubset(subset.image_dir, subset.num_repeats)));
  const resolution: [number, number] = typeof dataset.resolution === "number" ? [dataset.resolution, dataset.resolution] : dataset.resolution;
  const trainImages = subsets.reduce((sum, subset) => sum + subset.images * subset.repeats, 0);
  return { resolution, batchSize: dataset.batch_size, subsets, trainImages };
}

async function countSubset(imageDir: string, repeats: number): Promise<Subset> {
  try {
    const names = await readdir(imageDir);
    const images = names.filter((name) => IMAGE_FILE.test(name)).length;
    return { imageDir, images, repeats, state: images === 0 ? "empty" : "found" };
  } catch {
    return { imageDir, images: 0, repeats, state: "not_directory" };
  }
}

// One bucket per dataset (the simulator does not look inside images), so every batch is full
// but the last.
export function batchesPerEpoch(datasets: Dataset[]): number {
  return datasets.reduce((sum, dataset) => sum + Math.ceil(dataset.trainImages / dataset.batchSize), 0);
}
