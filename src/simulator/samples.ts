// sd-scripts' preview samples (train_util.sample_images_common) as the worker sees them: the line that starts them
// (the job's sampling phase), per image the settings sd-scripts logs and a tqdm bar of its sample_steps nested under
// the steps bar, then a PNG in `<output_dir>/sample` named as sd-scripts names it, which supervisor/samples.ts
// lists. The image is one colour that the seed, the step and the prompt's index choose, or a photo
// (preview-photos.ts). Only .json prompt files are read.
import { mkdir, readFile } from "node:fs/promises";
import { statOrNull } from "../fs.ts";
import { solidPng } from "../png.ts";
import { CUDA_OOM, type Io, PATH_NOT_GIVEN, print, raise, seededRandom, type Trainer } from "./io.ts";
import { previewPng } from "./preview-photos.ts";
import { tickThrough } from "./tqdm.ts";

// What one call did: nothing was due, samples were taken, or the run ended with this exit code.
type SampleOutcome = "none" | "sampled" | { exitCode: number };
type PromptDict = Record<string, unknown>;

// sample_image_inference's defaults.
const DEFAULT_SIZE = 512;
const DEFAULT_STEPS = 30;
const DEFAULT_SCALE = 7.5;
const DEFAULT_SAMPLER = "ddim";

// At training step `step`; each image takes a step's time.
export async function sampleImages(trainer: Trainer, step: number): Promise<SampleOutcome> {
  const { io, args, outputDir, knobs } = trainer;
  const every = args.sample_every_n_steps;
  // sd-scripts disables a --sample_every_n_steps of 0 or less (with a warning the simulator leaves out).
  if (every === null || every <= 0 || step % every !== 0) return "none";
  print(io, `\ngenerating sample images at step / サンプル画像生成 ステップ: ${step}`);
  const file = args.sample_prompts;
  if (file === null) return { exitCode: raise(io, PATH_NOT_GIVEN) };
  if (!statOrNull(file)?.isFile()) {
    print(io, `No prompt file / プロンプトファイルがありません: ${file}`);
    return "sampled";
  }
  const prompts = await readPrompts(file);
  if (typeof prompts === "string") return { exitCode: raise(io, prompts) };
  const dir = `${outputDir}/sample`;
  await mkdir(dir, { recursive: true });
  // sample-oom strikes in the step's first image, before it is saved.
  const oom = knobs.failures.strikes.some((strike) => strike.kind === "sample-oom" && strike.step === step);
  if (oom && prompts.length > 0) return { exitCode: raise(io, CUDA_OOM) };
  const prefix = args.output_name === null ? "" : `${args.output_name}_`;
  for (const [index, prompt] of prompts.entries()) {
    const seed = typeof prompt.seed === "number" ? prompt.seed : null;
    const steps = Number(prompt.sample_steps ?? DEFAULT_STEPS);
    const [width, height] = [Number(prompt.width ?? DEFAULT_SIZE), Number(prompt.height ?? DEFAULT_SIZE)];
    announceSample(io, prompt, { width, height, steps, sampler: args.sample_sampler ?? DEFAULT_SAMPLER, seed });
    await tickThrough(io, steps, knobs.secondsPerStep, true);
    // time.strftime("%Y%m%d%H%M%S", time.localtime()): Sweden's locale writes local time as ISO 8601 does.
    const time = new Date(io.wallClock() * 1000).toLocaleString("sv-SE").replace(/\D/g, "");
    const name = `${prefix}${String(step).padStart(6, "0")}_${String(index).padStart(2, "0")}_${time}`;
    const random = seededRandom((seed ?? Math.random() * 2 ** 32) ^ (step << 8) ^ index);
    const colour = () => solidPng(width, height, [random(), random(), random()].map((c) => Math.floor(c * 256)));
    const png = await previewPng(trainer, String(prompt.prompt ?? ""), step, colour);
    if (typeof png === "string") return { exitCode: raise(io, png) };
    await Bun.write(`${dir}/${name}${seed === null ? "" : `_${seed}`}.png`, png);
  }
  return "sampled";
}

interface SampleSettings {
  width: number;
  height: number;
  steps: number;
  sampler: string;
  seed: number | null;
}

// sample_image_inference's log of what it draws, sizes rounded down to a multiple of 8 as it rounds them.
function announceSample(io: Io, prompt: PromptDict, s: SampleSettings): void {
  const eight = (size: number) => Math.max(64, size - (size % 8));
  print(io, `prompt: ${String(prompt.prompt ?? "")}`);
  print(io, `negative_prompt: ${prompt.negative_prompt === undefined ? "None" : String(prompt.negative_prompt)}`);
  print(io, `height: ${eight(s.height)}`);
  print(io, `width: ${eight(s.width)}`);
  print(io, `sample_steps: ${s.steps}`);
  print(io, `scale: ${String(prompt.scale ?? DEFAULT_SCALE)}`);
  print(io, `sample_sampler: ${s.sampler}`);
  if (s.seed !== null) print(io, `seed: ${s.seed}`);
}

// The entries of a .json list, each a dict before the first image is drawn (a string, sd-scripts' line form,
// is not read here), or the exception that reading them raises.
async function readPrompts(file: string): Promise<PromptDict[] | string> {
  if (!file.endsWith(".json")) return `NotImplementedError: the simulator reads only .json prompt files: ${file}`;
  const prompts: unknown = await readFile(file, "utf8").then(JSON.parse).catch(() => null);
  const dict = (entry: unknown) => typeof entry === "object" && entry !== null && !Array.isArray(entry);
  return Array.isArray(prompts) && prompts.every(dict) ? (prompts as PromptDict[]) : "AssertionError";
}
