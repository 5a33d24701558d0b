// sd-scripts' preview samples (train_util.sample_images_common and sample_image_inference) as seen from
// outside: the log lines, per prompt its settings and the diffusers pipeline's own tqdm bar (leave=False,
// a line below the `steps:` bar once that is open), then a PNG in `<output_dir>/sample`. The pixels are a
// gradient drawn from the seed, the step and the prompt's index. Only .json prompt files are read.
import { statSync } from "node:fs";
import { mkdir, readFile } from "node:fs/promises";
import type { ScriptArgs } from "./argv.ts";
import { localTime, type Io, type Log } from "./io.ts";
import type { FailurePlan } from "./knobs.ts";
import { encodePng, RGB_BYTES } from "./png.ts";
import { CUDA_OOM, PATH_NOT_GIVEN, pyRepr, traceback } from "./python.ts";
import { ProgressBar, tickThrough } from "./tqdm.ts";
import { seededRandom } from "./training-loop.ts";

export type Sampling = { io: Io; log: Log; args: ScriptArgs; outputDir: string; secondsPerImage: number; failures: FailurePlan };

// What one call did: nothing was due, samples were taken, or the run ended with this exit code.
export type SampleOutcome = "none" | "sampled" | { exitCode: number };
type PromptDict = Record<string, unknown>;

// At training step `step` ("step"), or before the steps bar opens ("first").
export async function sampleImages(sampling: Sampling, step: number, when: "first" | "step"): Promise<SampleOutcome> {
  const { io, log, args } = sampling;
  const every = args.sample_every_n_steps;
  // sd-scripts disables a --sample_every_n_steps of 0 or less (with a warning the simulator leaves out).
  if (when === "first" ? !args.sample_at_first : every === null || every <= 0 || step % every !== 0) return "none";
  log("INFO", "");
  log("INFO", `generating sample images at step / サンプル画像生成 ステップ: ${step}`);
  const file = args.sample_prompts;
  if (file === null) return raise(io, PATH_NOT_GIVEN);
  if (!statSync(file, { throwIfNoEntry: false })?.isFile()) {
    log("ERROR", `No prompt file / プロンプトファイルがありません: ${file}`);
    return "sampled";
  }
  const prompts = await readPrompts(file);
  if (typeof prompts === "string") return raise(io, prompts);
  const dir = `${sampling.outputDir}/sample`;
  await mkdir(dir, { recursive: true });
  const oom = when === "step" && sampling.failures.strikes.some((s) => s.kind === "sample-oom" && s.step === step);
  // sd-scripts names a first sample by its epoch argument, 0.
  const number = when === "first" ? "e000000" : String(step).padStart(6, "0");
  // Every entry must be a dict before the first image (a string, sd-scripts' line form, is not read here).
  if (!prompts.every((entry) => typeof entry === "object" && entry !== null && !Array.isArray(entry))) {
    return raise(io, "AssertionError");
  }
  for (const [index, entry] of prompts.entries()) {
    const { width, height, seed, total } = logPrompt(log, entry as PromptDict, args.sample_sampler);
    const place = { position: when === "first" ? 0 : 1, leave: false };
    if (oom) {
      new ProgressBar(io, "", total, place);
      return raise(io, CUDA_OOM);
    }
    await tickThrough(io, total, sampling.secondsPerImage, place);
    const prefix = args.output_name === null ? "" : `${args.output_name}_`;
    const suffix = seed === null ? "" : `_${seed}`;
    // time.strftime("%Y%m%d%H%M%S", time.localtime()).
    const stamp = localTime(io.wallClock()).replace(/\D/g, "");
    const name = `${prefix}${number}_${String(index).padStart(2, "0")}_${stamp}${suffix}.png`;
    await Bun.write(`${dir}/${name}`, gradientPng(width, height, seed ?? Math.random() * 2 ** 32, step, index));
  }
  return "sampled";
}

// The entries of a .json list, or the exception that reading them raises.
async function readPrompts(file: string): Promise<unknown[] | string> {
  if (!file.endsWith(".json")) return `NotImplementedError: lora-worker simulate reads only .json prompt files: ${file}`;
  try {
    const prompts: unknown = JSON.parse(await readFile(file, "utf8"));
    return Array.isArray(prompts) ? prompts : "AssertionError";
  } catch (error) {
    return `json.decoder.JSONDecodeError: ${(error as Error).message}`;
  }
}

// sample_image_inference's settings, its defaults and its rounding, logged as it logs them.
function logPrompt(log: Log, prompt: PromptDict, defaultSampler: string) {
  const str = (value: unknown) => (typeof value === "string" ? value : pyRepr(value ?? null));
  const round = (size: unknown) => Math.max(64, Number(size) - (Number(size) % 8));
  const [width, height] = [round(prompt.width ?? 512), round(prompt.height ?? 512)];
  const [steps, sampler, seed] = [prompt.sample_steps ?? 30, str(prompt.sample_sampler ?? defaultSampler), prompt.seed];
  const settings = { prompt: prompt.prompt ?? "", negative_prompt: prompt.negative_prompt, height, width, sample_steps: steps };
  for (const [key, value] of Object.entries({ ...settings, scale: prompt.scale ?? 7.5, sample_sampler: sampler })) {
    log("INFO", `${key}: ${str(value)}`);
  }
  if (seed !== undefined && seed !== null) log("INFO", `seed: ${str(seed)}`);
  return { width, height, seed: seed === undefined ? null : (seed as number), total: denoisingSteps(sampler, Number(steps)) };
}

// len(scheduler.timesteps) in diffusers 0.32.1: the second-order samplers step twice after the first timestep,
// PNDM adds its 12 Runge-Kutta steps in place of the first 3.
function denoisingSteps(sampler: string, steps: number): number {
  if (/^(heun|(k_)?dpm_2(_a)?)$/.test(sampler)) return 2 * steps - 1;
  return sampler === "pndm" ? steps + 9 : steps;
}

// A diagonal gradient between two colours that the seed, the step and the index choose.
function gradientPng(width: number, height: number, seed: number, step: number, index: number): Buffer {
  const random = seededRandom(seed ^ Math.imul(step + 1, 0x9e3779b1) ^ Math.imul(index + 1, 0x85ebca6b));
  const [from, to] = [0, 1].map(() => [random() * 255, random() * 255, random() * 255]) as [number[], number[]];
  const rowBytes = 1 + width * RGB_BYTES;
  // Filter byte 0 (none) leads each row.
  const scanlines = new Uint8Array(rowBytes * height);
  for (let y = 0; y < height; y += 1) {
    for (let x = 0; x < width; x += 1) {
      const t = (x / width + y / height) / 2;
      const at = y * rowBytes + 1 + x * RGB_BYTES;
      for (let c = 0; c < RGB_BYTES; c += 1) scanlines[at + c] = from[c]! + (to[c]! - from[c]!) * t;
    }
  }
  return encodePng(width, height, scanlines);
}

function raise(io: Io, exception: string): SampleOutcome {
  io.stderr(traceback(exception));
  return { exitCode: 1 };
}
