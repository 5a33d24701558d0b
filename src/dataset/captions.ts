import { CAPTION_EXTENSION } from "../request/dataset.ts";
import { asClipReads, type ClipReading } from "../tokenizers/clip-bpe.ts";

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

// Python's readlines() ends a line at \n, \r\n or \r: the first ending is found without splitting the rest.
const LINE_END = /\r\n|\r|\n/;

/** The line sd-scripts trains on: the first, as Python's readlines() ends it (\n, \r\n or \r), stripped. */
export function trainedLine(text: string): string {
  const end = LINE_END.exec(text);
  return (end === null ? text : text.slice(0, end.index)).trim();
}

// A trigger is letters, digits, "_" and "-" (the request's pattern), none of them special outside a class.
function wordPattern(trigger: string): RegExp {
  return new RegExp(`(?<![\\p{L}\\p{N}_-])${trigger}(?![\\p{L}\\p{N}_-])`, "u");
}

/**
 * Whether the line the trainer reads holds the trigger as a whole word, as CLIP reads both ("OHWX," does;
 * "ohwx_man" does not; "ſkſ" does not hold "sks", since CLIP does not fold "ſ" into "s").
 */
export function hasTrigger(caption: string, trigger: string): boolean {
  return wordPattern(asClipReads(trigger)).test(asClipReads(trainedLine(caption)));
}

/** A trained line as CLIP reads it, up to the end of its first whole-word trigger; null without one. */
export function upToTrigger(line: string, trigger: string): ClipReading | null {
  const read = asClipReads(line);
  const found = wordPattern(asClipReads(trigger)).exec(read);
  // Cut where a piece ends (the trigger is a whole word), so its pieces are the line's own.
  return found === null ? null : (read.slice(0, found.index + found[0].length) as ClipReading);
}

/**
 * The caption with the trigger in front of the line the trainer reads: `<trigger> <class>, ` and the line as it
 * was (the same words sd-scripts gives an image without a caption, so a captioned image and a bare one train
 * the trigger alike); an empty line becomes `<trigger> <class>` alone. The other lines stay as they were.
 */
export function withTrigger(caption: string, classTokens: string): string {
  const end = LINE_END.exec(caption);
  const line = (end === null ? caption : caption.slice(0, end.index)).trim();
  const led = line === "" ? classTokens : `${classTokens}, ${line}`;
  return end === null ? led : led + caption.slice(end.index);
}
