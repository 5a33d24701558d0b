// sd-scripts' preview samples (train_util.sample_images_common and sample_image_inference) as seen from
// outside: the log lines, per prompt its settings and the diffusers pipeline's own tqdm bar (leave=False,
// a line below the `steps:` bar once that is open), then a PNG in `<output_dir>/sample`. The pixels are a
// gradient drawn from the seed, the step and the prompt's index. Only .json prompt files are read.
import { mkdir, readFile } from "node:fs/promises";
import { deflateSync } from "node:zlib";
import { statOrNull } from "../fs.ts";
import { CUDA_OOM, localTime, PATH_NOT_GIVEN, pyRepr, raise, seededRandom, type Log, type Trainer } from "./io.ts";
import type { FailurePlan } from "./knobs.ts";
import { ProgressBar, tickThrough } from "./tqdm.ts";

// What one call did: nothing was due, samples were taken, or the run ended with this exit code.
export type SampleOutcome = "none" | "sampled" | { exitCode: number };
type PromptDict = Record<string, unknown>;

const PNG_SIGNATURE = Uint8Array.of(0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a);
// Bit depth 8, colour type 2 (RGB), then compression, filter and interlace methods 0.
const PNG_RGB8 = [8, 2, 0, 0, 0];
const RGB_BYTES = 3;

// At training step `step` ("step"), or before the steps bar opens ("first"); each image takes `seconds`.
export async function sampleImages(
  { io, log, args, outputDir }: Trainer,
  failures: FailurePlan,
  seconds: number,
  step: number,
  when: "first" | "step",
): Promise<SampleOutcome> {
  const every = args.sample_every_n_steps;
  // sd-scripts disables a --sample_every_n_steps of 0 or less (with a warning the simulator leaves out).
  if (when === "first" ? !args.sample_at_first : every === null || every <= 0 || step % every !== 0) return "none";
  log("INFO", "");
  log("INFO", `generating sample images at step / サンプル画像生成 ステップ: ${step}`);
  const file = args.sample_prompts;
  if (file === null) return { exitCode: raise(io, PATH_NOT_GIVEN) };
  if (!statOrNull(file)?.isFile()) {
    log("ERROR", `No prompt file / プロンプトファイルがありません: ${file}`);
    return "sampled";
  }
  const prompts = await readPrompts(file);
  if (typeof prompts === "string") return { exitCode: raise(io, prompts) };
  const dir = `${outputDir}/sample`;
  await mkdir(dir, { recursive: true });
  const oom = when === "step" && failures.strikes.some((s) => s.kind === "sample-oom" && s.step === step);
  // sd-scripts names a first sample by its epoch argument, 0.
  const number = when === "first" ? "e000000" : String(step).padStart(6, "0");
  for (const [index, entry] of prompts.entries()) {
    const { width, height, seed, total } = logPrompt(log, entry, args.sample_sampler);
    const place = { position: when === "first" ? 0 : 1, leave: false };
    if (oom) {
      new ProgressBar(io, "", total, place);
      return { exitCode: raise(io, CUDA_OOM) };
    }
    await tickThrough(io, total, seconds, place);
    const prefix = args.output_name === null ? "" : `${args.output_name}_`;
    // time.strftime("%Y%m%d%H%M%S", time.localtime()).
    const stamp = localTime(io.wallClock()).replace(/\D/g, "");
    const name = `${prefix}${number}_${String(index).padStart(2, "0")}_${stamp}${seed === null ? "" : `_${seed}`}.png`;
    await Bun.write(`${dir}/${name}`, gradientPng(width, height, seed ?? Math.random() * 2 ** 32, step, index));
  }
  return "sampled";
}

// The entries of a .json list, each a dict before the first image is drawn (a string, sd-scripts' line form,
// is not read here), or the exception that reading them raises.
async function readPrompts(file: string): Promise<PromptDict[] | string> {
  if (!file.endsWith(".json")) return `NotImplementedError: the simulator reads only .json prompt files: ${file}`;
  const prompts: unknown = await readFile(file, "utf8").then(JSON.parse).catch(() => null);
  const dict = (entry: unknown) => typeof entry === "object" && entry !== null && !Array.isArray(entry);
  return Array.isArray(prompts) && prompts.every(dict) ? (prompts as PromptDict[]) : "AssertionError";
}

// sample_image_inference's settings, its defaults and its rounding, logged as it logs them.
function logPrompt(log: Log, prompt: PromptDict, defaultSampler: string) {
  const str = (value: unknown) => (typeof value === "string" ? value : pyRepr(value ?? null));
  const round = (size: unknown) => Math.max(64, Number(size) - (Number(size) % 8));
  const [width, height] = [round(prompt.width ?? 512), round(prompt.height ?? 512)];
  const [steps, sampler, seed] = [prompt.sample_steps ?? 30, str(prompt.sample_sampler ?? defaultSampler), prompt.seed];
  const { negative_prompt } = prompt;
  const settings = { prompt: prompt.prompt ?? "", negative_prompt, height, width, sample_steps: steps };
  for (const [key, value] of Object.entries({ ...settings, scale: prompt.scale ?? 7.5, sample_sampler: sampler })) {
    log("INFO", `${key}: ${str(value)}`);
  }
  if (seed !== undefined && seed !== null) log("INFO", `seed: ${str(seed)}`);
  const total = denoisingSteps(sampler, Number(steps));
  return { width, height, seed: seed === undefined ? null : (seed as number), total };
}

// len(scheduler.timesteps) in diffusers 0.32.1: the second-order samplers step twice after the first timestep,
// PNDM adds its 12 Runge-Kutta steps in place of the first 3.
function denoisingSteps(sampler: string, steps: number): number {
  if (/^(heun|(k_)?dpm_2(_a)?)$/.test(sampler)) return 2 * steps - 1;
  return sampler === "pndm" ? steps + 9 : steps;
}

// A diagonal gradient between two colours that the seed, the step and the index choose, as a PNG: the
// signature, then chunks, each its big-endian data length, type, data and the CRC-32 of type and data:
// IHDR, one IDAT of zlib data (each row a filter byte 0, then width x RGB), IEND.
function gradientPng(width: number, height: number, seed: number, step: number, index: number): Buffer {
  const random = seededRandom(seed ^ Math.imul(step + 1, 0x9e3779b1) ^ Math.imul(index + 1, 0x85ebca6b));
  const [from, to] = [0, 1].map(() => [random() * 255, random() * 255, random() * 255]) as [number[], number[]];
  const rowBytes = 1 + width * RGB_BYTES;
  const scanlines = new Uint8Array(rowBytes * height);
  for (let y = 0; y < height; y += 1) {
    for (let x = 0; x < width; x += 1) {
      const t = (x / width + y / height) / 2;
      const at = y * rowBytes + 1 + x * RGB_BYTES;
      for (let c = 0; c < RGB_BYTES; c += 1) scanlines[at + c] = from[c]! + (to[c]! - from[c]!) * t;
    }
  }
  const header = Buffer.alloc(13);
  header.writeUInt32BE(width, 0);
  header.writeUInt32BE(height, 4);
  header.set(PNG_RGB8, 8);
  const chunks = [chunk("IHDR", header), chunk("IDAT", deflateSync(scanlines)), chunk("IEND", new Uint8Array(0))];
  return Buffer.concat([PNG_SIGNATURE, ...chunks]);
}

function chunk(type: string, data: Uint8Array): Buffer {
  const framed = Buffer.alloc(data.length + 12);
  framed.writeUInt32BE(data.length, 0);
  framed.write(type, 4, "latin1");
  framed.set(data, 8);
  framed.writeUInt32BE(Bun.hash.crc32(framed.subarray(4, data.length + 8)), data.length + 8);
  return framed;
}
