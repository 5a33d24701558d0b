// The simulated previews drawn from real photos (`simulate.preview_*`), so that the worker's face scorer sees a run
// learn: the trigger's previews show someone else (or one colour: no face) until `learnedAt`, the subject from
// it; the class-only previews show someone else, and the subject from `bleedAt` (an overfit run). A prompt is the
// trigger's when it holds the trigger phrase sd-scripts is given as metadata, as a real model calls up the person.
import type { PreviewPhotos } from "./knobs.ts";
import type { Trainer } from "./io.ts";

// The photo a preview at `step` shows, or null for one colour.
export function photoOf(photos: PreviewPhotos, trigger: boolean, step: number): string | null {
  const from = (at: number) => at > 0 && step >= at;
  return from(trigger ? photos.learnedAt : photos.bleedAt) ? photos.subject : photos.other;
}

const isTriggerPrompt = (prompt: string, phrase: string | null) =>
  phrase !== null && new RegExp(`(^|\\W)${RegExp.escape(phrase)}(\\W|$)`).test(prompt);

/** The preview's PNG: the photo its prompt and step call for, re-encoded as sd-scripts saves PNG; or, for a photo
 * that cannot be read, the exception sd-scripts would raise. */
export async function previewPng(
  { knobs, args }: Trainer,
  prompt: string,
  step: number,
  oneColour: () => Uint8Array,
): Promise<Uint8Array | string> {
  const photos = knobs.previews;
  const photo = photos === null ? null : photoOf(photos, isTriggerPrompt(prompt, args.metadata_trigger_phrase), step);
  if (photo === null) return oneColour();
  const bytes = await Bun.file(photo).bytes().catch(() => null);
  if (bytes === null) return `FileNotFoundError: [Errno 2] No such file or directory: '${photo}'`;
  const unreadable = `PIL.UnidentifiedImageError: cannot identify image file '${photo}'`;
  return new Bun.Image(bytes).png().bytes().catch(() => unreadable);
}
