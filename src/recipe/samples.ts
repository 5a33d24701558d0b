import type { JobRequest } from "../request/schema.ts";
import { TIERS, type Tier } from "../tiers.ts";

// Preview images of the subject at a few points of the run: the recipe's fixed templates, filled only with the
// request's already-validated trigger and class. Each template is drawn twice with the same seed, with the trigger
// and with the class alone, so a person sees what the trigger calls up and whether the class has drifted toward the
// subject (class bleed), the two checks a person preset's previews make. sd-scripts reads them from a generated
// JSON prompts file (its `.json` form: a list of dicts), so no request text ever meets its inline `--w/--h/--s`
// option syntax.
export const SAMPLE_TEMPLATES = [
  { name: "portrait", text: "portrait photo of {subject}, head and shoulders, looking at the camera, soft light" },
  { name: "full_body", text: "full body photo of {subject}, standing, outdoors, natural light" },
  { name: "close_up", text: "close-up photo of the face of {subject}, neutral expression, sharp focus" },
  { name: "candid", text: "candid photo of {subject} sitting at a cafe table, depth of field" },
] as const;

type SampleTemplate = (typeof SAMPLE_TEMPLATES)[number];

/** Whom a preview shows: the subject as the trigger calls it up, or the class alone. */
export type SampleSubject = "trigger" | "class";
const SUBJECTS: readonly SampleSubject[] = ["trigger", "class"];

const NEGATIVE_PROMPT = "blurry, low quality, deformed, disfigured, watermark, text";
const GUIDANCE_SCALE = 7;
export const SAMPLE_SAMPLER = "euler_a";
const SEED_SPACE = 2 ** 32;
// The most points of a run at which previews are drawn, the last of them at its end.
const PREVIEW_POINTS = 4;

/** The template and subject of the prompts file's entry `index` (sd-scripts names each image by it). */
export function sampleOf(index: number): { template: SampleTemplate; subject: SampleSubject } | null {
  const template = SAMPLE_TEMPLATES[Math.floor(index / SUBJECTS.length)];
  return template === undefined || index < 0 ? null : { template, subject: SUBJECTS[index % SUBJECTS.length]! };
}

/** The prompt of the prompts file's entry `index`: its template filled with the trigger and class, or the class. */
export function samplePrompt(request: Pick<JobRequest, "trigger" | "subject_class">, index: number): string | null {
  const sample = sampleOf(index);
  if (sample === null) return null;
  const subject = sample.subject === "trigger" ? `${request.trigger} ${request.subject_class}` : request.subject_class;
  return sample.template.text.replace("{subject}", subject);
}

// The prompts file's entries: per template the request asks for, the trigger's and the class's, at the tier's
// resolution, both seeded alike from the request's seed.
export function samplePrompts(request: JobRequest): object[] {
  const { resolution: size, sampleSteps } = TIERS[request.tier];
  const count = Math.min(request.samples ?? 0, SAMPLE_TEMPLATES.length) * SUBJECTS.length;
  return Array.from({ length: count }, (_, index) => ({
    prompt: samplePrompt(request, index),
    negative_prompt: NEGATIVE_PROMPT,
    width: size,
    height: size,
    sample_steps: sampleSteps,
    scale: GUIDANCE_SCALE,
    // Two runs of one request, and the two subjects of one template, draw the same noise.
    seed: (request.seed + Math.floor(index / SUBJECTS.length)) % SEED_SPACE,
  }));
}

/**
 * Every how many steps previews are drawn (sd-scripts' --sample_every_n_steps: at each multiple of it): the fewest
 * steps that divide the run into at most PREVIEW_POINTS parts, so the last previews are of its end. Not tied to the
 * states the run saves, which pause and resume need with or without previews.
 */
export function sampleEvery(maxTrainSteps: number): number {
  let every = Math.ceil(maxTrainSteps / PREVIEW_POINTS);
  while (maxTrainSteps % every !== 0) every += 1;
  return every;
}

/**
 * Every how many steps a run saves its state and intermediate LoRA: the tier's cadence, or for a run with previews
 * the largest divisor of the preview cadence within it, so a LoRA is saved at each preview point and the one the
 * likeness report names best can be kept (fast: 25 steps in place of 40).
 */
export function saveEvery(tier: Pick<Tier, "maxTrainSteps" | "checkpointEvery">, previews: boolean): number {
  if (!previews) return tier.checkpointEvery;
  const points = sampleEvery(tier.maxTrainSteps);
  let every = Math.min(tier.checkpointEvery, points);
  while (points % every !== 0) every -= 1;
  return every;
}
