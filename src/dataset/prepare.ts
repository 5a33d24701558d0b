import { readdir, rename, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import type { DatasetReport, FileNote } from "../job.ts";
import { isImage } from "../request/dataset.ts";
import type { CaptionTokens } from "./clip-tokens.ts";
import { type BucketLayout, fitBucket } from "./buckets.ts";
import { type CaptionFile, captionsOf, planCaptions } from "./caption-plan.ts";
import { folderWarnings, listNotes } from "./file-notes.ts";
import { type Orientation, readOrientation, uprightOf } from "./orientation.ts";

// The job's own copy of the dataset, made ready for the trainer: each image stored upright, each caption leading
// with the trigger, and what sd-scripts would do quietly (scale a small image up, cut a long caption, train a
// duplicate twice) named in the record. Only the copy changes, never arbo's files; each change is written beside
// and renamed over, so a copy a resume reads through hard links keeps its own inode and never changes under it.

/** What the copy is prepared for: the request's trigger and class, the tier's buckets, and how tokens are counted. */
export interface PrepareFor {
  trigger: string;
  subjectClass: string;
  buckets: BucketLayout;
  /** The kohya folder the images lie in (`<repeats>_<trigger> <class>`), or null. */
  folder: string | null;
  /** How many tokens a caption holds (never fewer than the trainer's tokenizer counts). */
  tokens: CaptionTokens;
}

/** An image no decoder reads, or a caption sd-scripts cannot read: the job ends before the trainer starts. */
export class DatasetInvalid extends Error {}

// Pillow refuses an image over 89 M pixels as a decompression bomb; so does the worker, before decoding it.
const MAX_PIXELS = 89_478_485;

/**
 * `imageDir` holds the copy's images and captions; `shownAs` names a file there as it lies in arbo's dataset dir.
 * `signal` stops the work between two files.
 */
export async function prepareCopy(
  imageDir: string,
  shownAs: (name: string) => string,
  target: PrepareFor,
  signal?: AbortSignal,
): Promise<DatasetReport> {
  const names = new Set(await readdir(imageDir));
  // As the dataset scan chose them (request/dataset.ts): the copy holds nothing else.
  const images = [...names].filter(isImage).sort();
  const report: DatasetReport = {
    captions: {
      trigger_added: 0, trigger_present: 0, trigger_moved: 0, images_without_caption: 0, cut: [],
      tokens_counted_by: target.tokens.by,
    },
    token_window: { tokens: 75, longest: null },
    turned_upright: [],
    small: [],
    duplicates: [],
    warnings: folderWarnings(target),
  };
  const notes: FileNote[] = [];
  const byDigest = new Map<string, string[]>();
  for (const image of images) {
    signal?.throwIfAborted();
    const shown = shownAs(image);
    const found = await uprightImage(join(imageDir, image), shown);
    if (found.turned) {
      report.turned_upright.push(shown);
      notes.push({ file: shown, did: "turned_upright", stored_as: shown });
    }
    const { scale } = fitBucket(found.width, found.height, target.buckets);
    if (scale > 1) {
      report.small.push({ image: shown, width: found.width, height: found.height, scale });
      notes.push({ file: shown, did: "small", scale });
    }
    byDigest.set(found.sha256, [...(byDigest.get(found.sha256) ?? []), shown]);
  }
  report.duplicates = [...byDigest.values()].filter((set) => set.length > 1);
  for (const [first, ...rest] of report.duplicates) {
    for (const file of rest) notes.push({ file, did: "duplicate", same_as: first! });
  }
  await leadCaptions(imageDir, images, names, shownAs, target, report, notes, signal);
  return { ...report, ...listNotes(notes) };
}

interface ImageFacts {
  turned: boolean;
  width: number;
  height: number;
  // Of the bytes arbo sent, so identical uploads are found whatever their orientation.
  sha256: string;
}

async function uprightImage(path: string, shown: string): Promise<ImageFacts> {
  const bytes = await Bun.file(path).bytes();
  const sha256 = new Bun.CryptoHasher("sha256").update(bytes).digest("hex");
  const orientation = readOrientation(bytes);
  try {
    // As stored, then as seen: a quarter turn swaps the sides.
    const stored = await new Bun.Image(bytes, { autoOrient: false, maxPixels: MAX_PIXELS }).metadata();
    const quarter = uprightOf(orientation).rotate % 180 !== 0;
    const [width, height] = quarter ? [stored.height, stored.width] : [stored.width, stored.height];
    if (orientation !== 1) await writeBeside(path, await uprightPng(bytes, orientation));
    return { turned: orientation !== 1, width, height, sha256 };
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === undefined || !code.startsWith("ERR_IMAGE")) throw err;
    throw new DatasetInvalid(`${shown} cannot be decoded as an image (${code}): the trainer could not read it either`);
  }
}

// PNG keeps every decoded pixel; the file keeps its name (sd-scripts finds images by extension and Pillow reads
// them by content), so its caption and the record go on naming it as arbo did.
async function uprightPng(bytes: Uint8Array, orientation: Orientation): Promise<Uint8Array> {
  const { rotate, mirror } = uprightOf(orientation);
  const image = new Bun.Image(bytes, { autoOrient: false, maxPixels: MAX_PIXELS }).rotate(rotate);
  return (mirror ? image.flop() : image).png().bytes();
}

async function leadCaptions(
  imageDir: string,
  images: string[],
  names: Set<string>,
  shownAs: (name: string) => string,
  target: PrepareFor,
  report: DatasetReport,
  notes: FileNote[],
  signal?: AbortSignal,
): Promise<void> {
  const classTokens = `${target.trigger} ${target.subjectClass}`;
  const { captions, bare } = captionsOf(images, names);
  report.captions.images_without_caption = bare.length;
  for (const image of bare) notes.push({ file: shownAs(image), did: "no_caption", trains_on: classTokens });
  const files: CaptionFile[] = [];
  for (const name of captions) {
    signal?.throwIfAborted();
    const text = decodeCaption(await Bun.file(join(imageDir, name)).bytes(), shownAs(name));
    files.push({ name, shown: shownAs(name), text });
  }
  const plan = await planCaptions(files, { ...target, count: target.tokens.count });
  report.token_window = { tokens: plan.window, longest: plan.longest };
  for (const caption of plan.captions) {
    signal?.throwIfAborted();
    const { shown: file, prefix } = caption;
    if (caption.did === "caption_kept") report.captions.trigger_present += 1;
    else {
      if (caption.did === "trigger_added") report.captions.trigger_added += 1;
      else report.captions.trigger_moved! += 1;
      await writeBeside(join(imageDir, caption.name), caption.text);
    }
    notes.push(
      caption.did === "caption_kept" ? { file, did: "caption_kept" }
      : caption.did === "trigger_added" ? { file, did: "trigger_added", prefix: prefix! }
      : { file, did: "trigger_moved", prefix: prefix!, trigger_token: caption.triggerToken! },
    );
    if (caption.tokens > plan.window) report.captions.cut.push({ caption: file, tokens: caption.tokens });
  }
}

// sd-scripts reads a caption as UTF-8 and stops the run on any other byte ("illegal char in file (not UTF-8)").
function decodeCaption(bytes: Uint8Array, shown: string): string {
  try {
    return new TextDecoder("utf-8", { fatal: true }).decode(bytes);
  } catch {
    throw new DatasetInvalid(`${shown} is not UTF-8 text: sd-scripts stops the run on it`);
  }
}

async function writeBeside(path: string, data: string | Uint8Array): Promise<void> {
  const tmp = `${path}.upright-tmp`;
  try {
    await writeFile(tmp, data, { mode: 0o640, flag: "wx" });
    await rename(tmp, path);
  } catch (err) {
    await rm(tmp, { force: true });
    throw err;
  }
}
