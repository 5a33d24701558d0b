import { CAPTION_EXTENSION } from "../request/dataset.ts";

// What sd-scripts makes of captions (library/train_util.py, read_caption and load_dreambooth_dir): an image's
// caption is `<stem>.txt`, or for a stem of five or more "_"-parts the stem less its last four (a face-cropped
// image's), whichever exists first; only the file's first line is trained on, stripped; a subset's class_tokens
// ("<trigger> <class>") stand in only for an image with no caption file at all.

/** The caption files sd-scripts tries for an image, in its order. */
export function captionCandidates(image: string): string[] {
  const stem = image.slice(0, image.lastIndexOf("."));
  const parts = stem.split("_");
  const faceStem = parts.length >= 5 ? parts.slice(0, -4).join("_") : stem;
  return [stem + CAPTION_EXTENSION, faceStem + CAPTION_EXTENSION];
}

/** The line sd-scripts trains on: the first, as Python's readlines() ends it (\n, \r\n or \r), stripped. */
export function trainedLine(text: string): string {
  return (text.split(/\r\n|\r|\n/)[0] ?? "").trim();
}

// A trigger is letters, digits, "_" and "-" (the request's pattern), none of them special outside a class; the
// CLIP tokenizers lowercase every caption, so case does not count.
function wordPattern(trigger: string): RegExp {
  return new RegExp(`(?<![\\p{L}\\p{N}_-])${trigger}(?![\\p{L}\\p{N}_-])`, "iu");
}

/** Whether the line the trainer reads holds the trigger as a whole word ("ohwx," does; "ohwx_man" does not). */
export function hasTrigger(caption: string, trigger: string): boolean {
  return wordPattern(trigger).test(trainedLine(caption));
}

/** Where the first whole-word trigger of a trained line ends (a string index), or null without one. */
export function triggerEnd(line: string, trigger: string): number | null {
  const found = wordPattern(trigger).exec(line);
  return found === null ? null : found.index + found[0].length;
}

/**
 * The caption with the trigger in front of the line the trainer reads: `<trigger> <class>, ` and the line as it
 * was (the same words sd-scripts gives an image without a caption, so a captioned image and a bare one train
 * the trigger alike); an empty line becomes `<trigger> <class>` alone. The other lines stay as they were.
 */
export function withTrigger(caption: string, classTokens: string): string {
  const [first = "", ...rest] = caption.split(/(?<=\r\n|\r(?!\n)|\n)/);
  const ending = first.match(/(\r\n|\r|\n)$/)?.[0] ?? "";
  const line = first.slice(0, first.length - ending.length).trim();
  const led = line === "" ? classTokens : `${classTokens}, ${line}`;
  return [led + ending, ...rest].join("");
}
