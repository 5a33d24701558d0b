import { describe, expect, test } from "bun:test";
import { readdir } from "node:fs/promises";
import { join } from "node:path";
import { encodePng } from "../../src/png.ts";
import { runSimulated, simWorkspace } from "../support/sim-run.ts";

// Two "photos" told apart by their sizes, and the one-colour preview by the prompt's: what a preview shows is read
// back from its PNG's size.
const [SUBJECT, OTHER, COLOUR] = [[40, 30], [20, 10], [64, 64]] as const;
const PROMPTS = [
  { prompt: "portrait photo of ohwx person", width: 64, height: 64, sample_steps: 1, seed: 1 },
  { prompt: "portrait photo of person", width: 64, height: 64, sample_steps: 1, seed: 1 },
];
const SUBJECT_KNOB = "LORA_WORKER_SIMULATE_PREVIEW_SUBJECT";

async function photoRun(knobs: (photos: { subject: string; other: string }) => Record<string, string>) {
  await using job = await simWorkspace("simulator-photos-", 4);
  const photos = { subject: join(job.dir, "subject.png"), other: join(job.dir, "other.jpg") };
  await Bun.write(photos.subject, encodePng(SUBJECT[0], SUBJECT[1], () => [200, 10, 10]));
  // A JPEG, as a photo usually is: the preview is a PNG all the same.
  await Bun.write(photos.other, await new Bun.Image(encodePng(OTHER[0], OTHER[1], () => [9, 9, 200])).jpeg().bytes());
  await Bun.write(join(job.dir, "prompts.json"), JSON.stringify(PROMPTS));
  const out = join(job.dir, "out");
  const extra = [
    "--sample_every_n_steps=2", `--sample_prompts=${join(job.dir, "prompts.json")}`, "--metadata_trigger_phrase=ohwx",
  ];
  const run = await runSimulated({ dir: job.dir, outputDir: out, steps: 8, extra, knobs: knobs(photos), logPath: join(job.dir, "log") });
  const names = (await readdir(join(out, "sample")).catch(() => [] as string[])).sort();
  const shown = await Promise.all(names.map(async (name) => {
    const { width, height } = await new Bun.Image(await Bun.file(join(out, "sample", name)).bytes()).metadata();
    const seen = [[SUBJECT, "subject"], [OTHER, "other"], [COLOUR, "colour"]] as const;
    const who = seen.find(([[w, h]]) => w === width && h === height)?.[1] ?? `${width}x${height}`;
    return `${name.slice(7, 13).replace(/^0+/, "")}/${name.slice(14, 16) === "00" ? "trigger" : "class"}: ${who}`;
  }));
  return { ...run, shown };
}

describe("simulated previews drawn from photos", () => {
  test("the trigger's previews show someone else until the step it learns at, the class's from the bleed step", async () => {
    const run = await photoRun(({ subject, other }) => ({
      [SUBJECT_KNOB]: subject, LORA_WORKER_SIMULATE_PREVIEW_OTHER: other,
      LORA_WORKER_SIMULATE_PREVIEW_LEARNED_AT: "4", LORA_WORKER_SIMULATE_PREVIEW_BLEED_AT: "8",
    }));
    expect(run.exitCode).toBe(0);
    expect(run.shown).toEqual([
      "2/trigger: other", "2/class: other", "4/trigger: subject", "4/class: other",
      "6/trigger: subject", "6/class: other", "8/trigger: subject", "8/class: subject",
    ]);
  });

  test("without someone else the unlearned previews are one colour, and with no learned step they stay so", async () => {
    const run = await photoRun(({ subject }) => ({ [SUBJECT_KNOB]: subject }));
    expect(run.exitCode).toBe(0);
    expect(new Set(run.shown.map((s) => s.split(": ")[1]))).toEqual(new Set(["colour"]));
    // Contrast: with a learned step, the subject shows.
    const learned = await photoRun(({ subject }) => ({ [SUBJECT_KNOB]: subject, LORA_WORKER_SIMULATE_PREVIEW_LEARNED_AT: "6" }));
    expect(learned.shown.filter((s) => s.endsWith("subject"))).toEqual(["6/trigger: subject", "8/trigger: subject"]);
  });

  test("a photo that is not there is the exception sd-scripts raises, at the first preview", async () => {
    const run = await photoRun(() => ({ [SUBJECT_KNOB]: "/nonexistent/subject.png", LORA_WORKER_SIMULATE_PREVIEW_LEARNED_AT: "2" }));
    expect(run.exitCode).toBe(1);
    expect(run.log).toContain("FileNotFoundError: [Errno 2] No such file or directory: '/nonexistent/subject.png'");
    expect(run.shown).toEqual([]);
  });

  test("a preview knob without the subject's photo is refused before anything runs", async () => {
    const run = await photoRun(() => ({ LORA_WORKER_SIMULATE_PREVIEW_LEARNED_AT: "2" }));
    expect(run.exitCode).toBe(2);
    expect(run.log).toContain(`LORA_WORKER_SIMULATE_PREVIEW_LEARNED_AT needs ${SUBJECT_KNOB}`);
  });
});
