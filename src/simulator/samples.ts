// sd-scripts' preview samples (train_util.sample_images_common) as the worker sees them: the line that starts them
// (the job's sampling phase), a tqdm bar per image of its sample_steps, then a PNG in `<output_dir>/sample` named
// as sd-scripts names it, which supervisor/samples.ts lists. The image is one colour that the seed, the step and
// the prompt's index choose; the per-prompt settings sd-scripts logs are left out. Only .json prompt files are read.
import { mkdir, readFile } from "node:fs/promises";
import { deflateSync } from "node:zlib";
import { statOrNull } from "../fs.ts";
import { CUDA_OOM, PATH_NOT_GIVEN, print, raise, seededRandom, type Trainer } from "./io.ts";
import { tickThrough } from "./tqdm.ts";

// What one call did: nothing was due, samples were taken, or the run ended with this exit code.
export type SampleOutcome = "none" | "sampled" | { exitCode: number };
type PromptDict = Record<string, unknown>;

const PNG_SIGNATURE = Uint8Array.of(0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a);
// sample_image_inference's defaults.
const DEFAULT_SIZE = 512;
const DEFAULT_STEPS = 30;

// At training step `step`; each image takes a step's time.
export async function sampleImages({ io, args, outputDir, knobs }: Trainer, step: number): Promise<SampleOutcome> {
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
    await tickThrough(io, Number(prompt.sample_steps ?? DEFAULT_STEPS), knobs.secondsPerStep);
    const seed = typeof prompt.seed === "number" ? prompt.seed : null;
    // time.strftime("%Y%m%d%H%M%S", time.localtime()): Sweden's locale writes local time as ISO 8601 does.
    const time = new Date(io.wallClock() * 1000).toLocaleString("sv-SE").replace(/\D/g, "");
    const name = `${prefix}${String(step).padStart(6, "0")}_${String(index).padStart(2, "0")}_${time}`;
    const [width, height] = [Number(prompt.width ?? DEFAULT_SIZE), Number(prompt.height ?? DEFAULT_SIZE)];
    const png = solidPng(width, height, seededRandom((seed ?? Math.random() * 2 ** 32) ^ (step << 8) ^ index));
    await Bun.write(`${dir}/${name}${seed === null ? "" : `_${seed}`}.png`, png);
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

// A PNG: the signature, then chunks, each its big-endian data length, type, data and the CRC-32 of type and
// data: IHDR, one IDAT of zlib data (each row a filter byte 0, then width x RGB), IEND.
function solidPng(width: number, height: number, random: () => number): Buffer {
  const colour = [random(), random(), random()].map((channel) => Math.floor(channel * 256));
  const row = Buffer.from([0, ...Array.from({ length: width }, () => colour).flat()]);
  const header = Buffer.alloc(13);
  header.writeUInt32BE(width, 0);
  header.writeUInt32BE(height, 4);
  // Bit depth 8, colour type 2 (RGB), then compression, filter and interlace methods 0.
  header.set([8, 2, 0, 0, 0], 8);
  const pixels = deflateSync(Buffer.concat(Array.from({ length: height }, () => row)));
  const chunks = [chunk("IHDR", header), chunk("IDAT", pixels), chunk("IEND", new Uint8Array(0))];
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
