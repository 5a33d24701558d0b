import { describe, expect, test } from "bun:test";
import { existsSync } from "node:fs";
import { readdir } from "node:fs/promises";
import { join } from "node:path";
import { crc32, inflateSync } from "node:zlib";
import { runSimulated, simWorkspace, type SimWorkspace } from "../support/sim-run.ts";

// One image repeated 5 times at batch size 1: 5 batches per epoch, so 8 steps take 2 epochs.
const REPEATS = 5;
const PNG_SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
const GENERATING = "generating sample images at step / サンプル画像生成 ステップ: ";
const PROMPTS = [
  { prompt: "portrait photo of ohwx person", width: 1024, height: 768, sample_steps: 20, seed: 42 },
  { prompt: "full body photo of ohwx person", width: 768, height: 64, sample_steps: 3, scale: 5.5, seed: 43 },
];

interface Workspace extends SimWorkspace {
  out: string;
  prompts: string;
}

async function workspace(prompts: unknown[] = PROMPTS): Promise<Workspace> {
  const base = await simWorkspace("simulator-samples-", REPEATS);
  await Bun.write(join(base.dir, "prompts.json"), JSON.stringify(prompts));
  return { ...base, out: join(base.dir, "out"), prompts: join(base.dir, "prompts.json") };
}

function simulate(job: Workspace, steps: number, extra: string[], knobs: Record<string, string> = {}) {
  return runSimulated({ dir: job.dir, outputDir: job.out, steps, extra, knobs, logPath: join(job.dir, "train.log") });
}

// What a reader keeps of the log, in order: `steps n` for each redraw of the steps bar (repeats folded, and
// none just before sampling starts), `sample n` when sampling starts, `save n` for a checkpoint (0: the last).
function events(log: string): string[] {
  const found: string[] = [];
  for (const record of log.split(/[\r\n]/)) {
    const bar = /^steps: +\d+%\|[^|]*\| (\d+)\/\d+ \[/.exec(record);
    const sample = record.startsWith(GENERATING) ? record.slice(GENERATING.length) : null;
    const save = /^saving checkpoint: .*?(?:-step0*(\d+))?\.safetensors$/.exec(record);
    const event = bar ? `steps ${bar[1]}` : sample !== null ? `sample ${sample}` : save ? `save ${save[1] ?? 0}` : null;
    if (event !== null && event !== found.at(-1)) found.push(event);
  }
  // At 0 seconds a step, tqdm's mininterval may or may not let the update before a sampling redraw.
  return found.filter((event, index) => found[index + 1] !== event.replace("steps", "sample"));
}

// A PNG decoded as far as its pixels: every chunk's CRC, IHDR's fields, and inflated IDAT data of one filter
// byte and width x 3 bytes a row.
function decodePng(bytes: Buffer) {
  expect(bytes.subarray(0, 8)).toEqual(PNG_SIGNATURE);
  const types: string[] = [];
  const idat: Buffer[] = [];
  let header: Buffer = Buffer.alloc(0);
  for (let at = 8; at < bytes.length; ) {
    const length = bytes.readUInt32BE(at);
    const typed = bytes.subarray(at + 4, at + 8 + length);
    expect(bytes.readUInt32BE(at + 8 + length)).toBe(crc32(typed));
    const type = typed.subarray(0, 4).toString("latin1");
    types.push(type);
    if (type === "IHDR") header = typed.subarray(4);
    if (type === "IDAT") idat.push(typed.subarray(4));
    at += 12 + length;
  }
  const [width, height] = [header.readUInt32BE(0), header.readUInt32BE(4)];
  // Bit depth 8, colour type 2 (RGB), then compression, filter and interlace methods 0.
  const fields = [...header.subarray(8)];
  const pixels = inflateSync(Buffer.concat(idat));
  const filters = new Set(Array.from({ length: height }, (_, row) => pixels[row * (1 + width * 3)]));
  const rowBytes = pixels.length / height;
  return { width, height, fields, chunks: [...new Set(types)], rowBytes, filters: [...filters], pixels };
}

const stamped = (name: string) => name.replace(/_\d{14}(_|\.)/, "_<time>$1");

describe("preview samples", () => {
  test("every N steps each prompt becomes a PNG named as sd-scripts names it, before the checkpoint", async () => {
    await using job = await workspace();
    const flags = [`--sample_every_n_steps=4`, `--sample_prompts=${job.prompts}`, "--sample_sampler=euler_a"];
    const run = await simulate(job, 8, [...flags, "--save_every_n_steps=4"]);
    expect(run.exitCode).toBe(0);
    const names = (await readdir(join(job.out, "sample"))).sort();
    expect(names.map(stamped)).toEqual([
      "mylora_000004_00_<time>_42.png",
      "mylora_000004_01_<time>_43.png",
      "mylora_000008_00_<time>_42.png",
      "mylora_000008_01_<time>_43.png",
    ]);
    const read = async (name: string) => Buffer.from(await Bun.file(join(job.out, "sample", name)).arrayBuffer());
    const decoded = await Promise.all(names.map(async (name) => decodePng(await read(name))));
    const shape = (width: number, height: number) => {
      const fields = [8, 2, 0, 0, 0];
      return { width, height, fields, chunks: ["IHDR", "IDAT", "IEND"], rowBytes: 1 + width * 3, filters: [0] };
    };
    const shapes = decoded.map(({ pixels, ...png }) => png);
    expect(shapes).toEqual([shape(1024, 768), shape(768, 64), shape(1024, 768), shape(768, 64)]);
    // The same prompt and seed at another step is another picture.
    expect(decoded[0]!.pixels.equals(decoded[2]!.pixels)).toBe(false);

    // Samples at steps 4 and 8 only, each before its checkpoint; the next test shows the bar's update before them.
    expect(events(run.log)).toEqual([
      ...["steps 0", "steps 1", "steps 2", "steps 3", "sample 4", "save 4", "steps 4"],
      ...["steps 5", "steps 6", "steps 7", "sample 8", "save 8", "steps 8", "save 0", "steps 8"],
    ]);
  });

  test("at real step times each image's bar runs to 100% and the steps clock skips the sampling", async () => {
    const IMAGES = 10;
    await using job = await workspace(Array.from({ length: IMAGES }, () => ({ prompt: "a photo", sample_steps: 1 })));
    const flags = ["--sample_every_n_steps=1", `--sample_prompts=${job.prompts}`, "--save_every_n_steps=1"];
    const run = await simulate(job, 1, flags, { LORA_WORKER_SIMULATE_SECONDS_PER_STEP: "0.2" });
    expect(run.exitCode).toBe(0);
    // bar.update() redraws step 1, with no avr_loss yet, before its samples (a redraw events() folds away).
    expect(run.log).toMatch(new RegExp(`\rsteps: 100%\\|██████████\\| 1/1 \\[[^\\]]*\\]\n${GENERATING}1\n`));
    expect(events(run.log)).toEqual(["steps 0", "sample 1", "save 1", "steps 1", "save 0", "steps 1"]);
    const start = run.log.indexOf(GENERATING);
    const sampled = run.log.slice(start, run.log.indexOf("saving checkpoint:", start));
    // Each image: the settings sd-scripts logs, then its bar nested under the steps bar ("\n\r" + line + ESC[A).
    const settings = "prompt: a photo\nnegative_prompt: None\nheight: 512\nwidth: 512\nsample_steps: 1\nscale: 7.5\n" +
      "sample_sampler: ddim\n";
    expect(sampled.split(settings).length - 1).toBe(IMAGES);
    expect(sampled).toContain("\n\r  0%|          | 0/1 [00:00<?, ?it/s]\x1b[A");
    const bars = sampled.split("\r").slice(1).filter((frame) => /%\|/.test(frame));
    const frames = bars.map((frame) => frame.replace(/\[.*?\]/, "[...]").replace(/\x1b\[A[\s\S]*$/, ""));
    // The update's redraw, then close()'s.
    const image = ["  0%|          | 0/1 [...]", "100%|██████████| 1/1 [...]", "100%|██████████| 1/1 [...]"];
    expect(frames).toEqual(Array.from({ length: IMAGES }, () => image).flat());
    // No seed: no seed in the name.
    const names = (await readdir(join(job.out, "sample"))).sort().map(stamped);
    expect(names).toEqual(Array.from({ length: IMAGES }, (_, index) => `mylora_000001_0${index}_<time>.png`));
    // A 0.2 s step, then ten images of 0.2 s each that tqdm's unpause() takes off the steps clock, then the save. The
    // steps bar's time for its one step is less than the images' bars' own times added up: a clock that counted the
    // sampling would be more, however fast or loaded the host, as both are read from the same run's bars.
    const secondsOf = (rate: RegExpMatchArray) => (rate[2] === "s/it" ? Number(rate[1]) : 1 / Number(rate[1]));
    const step = /\| 1\/1 \[[^,]*, *([\d.]+)(it\/s|s\/it), avr_loss/.exec(run.log);
    const images = [...sampled.matchAll(/100%\|██████████\| 1\/1 \[[^,]*, *([\d.]+)(it\/s|s\/it)\]/g)];
    expect(images).toHaveLength(2 * IMAGES);
    const sampling = images.filter((_, i) => i % 2 === 1).reduce((sum, rate) => sum + secondsOf(rate), 0);
    expect(sampling).toBeGreaterThanOrEqual(IMAGES * 0.2);
    expect(secondsOf(step!)).toBeLessThan(sampling);
  });

  test("without any --sample_* flag nothing is sampled: no line, no sample folder", async () => {
    await using job = await workspace();
    const run = await simulate(job, 8, ["--save_every_n_steps=4"]);
    expect(run.exitCode).toBe(0);
    expect(run.log).not.toContain("generating sample images");
    expect(existsSync(join(job.out, "sample"))).toBe(false);
    expect(events(run.log).filter((event) => !event.startsWith("steps"))).toEqual(["save 4", "save 8", "save 0"]);
  });

  test("a missing prompts file is logged as an error at each sampling step, and training goes on", async () => {
    await using job = await workspace();
    const missing = join(job.dir, "no-such-prompts.json");
    const run = await simulate(job, 8, ["--sample_every_n_steps=4", `--sample_prompts=${missing}`]);
    expect(run.exitCode).toBe(0);
    const error = `No prompt file / プロンプトファイルがありません: ${missing}\n`;
    for (const step of [4, 8]) expect(run.log).toContain(`\n${GENERATING}${step}\n${error}`);
    expect(existsSync(join(job.out, "sample"))).toBe(false);
    expect(existsSync(join(job.out, "mylora.safetensors"))).toBe(true);
  });

  test("sample-oom@4 raises CUDA's OOM in step 4's first image and exits as oom@N does", async () => {
    await using job = await workspace();
    const flags = ["--sample_every_n_steps=4", `--sample_prompts=${job.prompts}`, "--sample_sampler=euler_a"];
    const sampleOom = await simulate(job, 8, flags, { LORA_WORKER_SIMULATE_FAIL: "sample-oom@4" });
    const oom = await simulate(job, 8, flags, { LORA_WORKER_SIMULATE_FAIL: "oom@4" });
    expect([sampleOom.exitCode, oom.exitCode]).toEqual([1, 1]);
    const raised = "Traceback (most recent call last):\ntorch.OutOfMemoryError: CUDA out of memory.";
    expect(sampleOom.log).toContain(`\n${GENERATING}4\n${raised}`);
    for (const run of [sampleOom, oom]) expect(run.log).toContain("returned non-zero exit status 1.\n");
    expect(events(sampleOom.log).slice(-3)).toEqual(["steps 3", "sample 4", "steps 4"]);
    // Nothing of step 4 was saved: no image.
    expect(await readdir(join(job.out, "sample"))).toEqual([]);
  });

  test("a sampler not among sd-scripts' choices is argparse's error, exit 2 inside accelerate's 1", async () => {
    await using job = await workspace();
    const run = await simulate(job, 8, ["--sample_sampler=euler_b"]);
    expect(run.exitCode).toBe(1);
    const choices =
      "'ddim', 'pndm', 'lms', 'euler', 'euler_a', 'heun', 'dpm_2', 'dpm_2_a', 'dpmsolver', 'dpmsolver++', " +
      "'dpmsingle', 'k_lms', 'k_euler', 'k_euler_a', 'k_dpm_2', 'k_dpm_2_a'";
    const error = `argument --sample_sampler: invalid choice: 'euler_b' (choose from ${choices})`;
    expect(run.log).toStartWith(`usage: sdxl_train_network.py [options]\nsdxl_train_network.py: error: ${error}\n`);
    expect(run.log).toContain("returned non-zero exit status 2.\n");
  });
});
