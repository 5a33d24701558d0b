import type { JobRequest } from "../request/schema.ts";
import { TIERS } from "../tiers.ts";

// Preview images of the subject at each checkpoint: the recipe's fixed templates, filled only with the request's
// already-validated trigger and class. sd-scripts reads them from a generated JSON prompts file (its `.json`
// form: a list of dicts), so no request text ever meets its inline `--w/--h/--s` option syntax.
export const SAMPLE_TEMPLATES = [
  { name: "portrait", text: "portrait photo of {subject}, head and shoulders, looking at the camera, soft light" },
  { name: "full_body", text: "full body photo of {subject}, standing, outdoors, natural light" },
  { name: "close_up", text: "close-up photo of the face of {subject}, neutral expression, sharp focus" },
  { name: "candid", text: "candid photo of {subject} sitting at a cafe table, depth of field" },
] as const;

const NEGATIVE_PROMPT = "blurry, low quality, deformed, disfigured, watermark, text";
const GUIDANCE_SCALE = 7;
export const SAMPLE_SAMPLER = "euler_a";
const SEED_SPACE = 2 ** 32;

/** The prompt of the request's sample `index`: its template filled with the trigger and class. */
export function samplePrompt(request: Pick<JobRequest, "trigger" | "subject_class">, index: number): string | null {
  const template = SAMPLE_TEMPLATES[index];
  const subject = `${request.trigger} ${request.subject_class}`;
  return template === undefined ? null : template.text.replace("{subject}", subject);
}

// The prompts file's entries: one per sample, at the tier's resolution, seeded from the request's seed.
export function samplePrompts(request: JobRequest): object[] {
  const { resolution: size, sampleSteps } = TIERS[request.tier];
  return SAMPLE_TEMPLATES.slice(0, request.samples ?? 0).map((_, index) => ({
    prompt: samplePrompt(request, index),
    negative_prompt: NEGATIVE_PROMPT,
    width: size,
    height: size,
    sample_steps: sampleSteps,
    scale: GUIDANCE_SCALE,
    // Two runs of one request draw the same noise for each template.
    seed: (request.seed + index) % SEED_SPACE,
  }));
}
