import { readdir, rename, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { faultOn, sha256Hex } from "../fs.ts";
import { type DatasetReport, type FileNote, type ImageSize, ONE_WINDOW } from "../job.ts";
import { isImage } from "../request/dataset.ts";
import type { CaptionTokens } from "./clip-tokens.ts";
import { type BucketLayout, fitBucket } from "./buckets.ts";
import { type CaptionFile, captionsOf, planCaptions } from "./caption-plan.ts";
import { folderWarnings, listNotes } from "./file-notes.ts";
import { gifSize, isGif } from "./gif-size.ts";
import { isTiff, type Orientation, readOrientation, tiffSize, uprightOf } from "./orientation.ts";

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

/** An image the worker cannot read or Pillow refuses, or a caption sd-scripts cannot read: the job ends here. */
export class DatasetInvalid extends Error {}

// Pillow, which sd-scripts reads images with, warns (DecompressionBombWarning) of an image over MAX_IMAGE_PIXELS
// and refuses (DecompressionBombError) one over twice that (PIL/Image.py, _decompression_bomb_check).
const PILLOW_WARNS_OVER = 89_478_485;
const PILLOW_REFUSES_OVER = 2 * PILLOW_WARNS_OVER;
// Reading a header allocates no pixels: no bound is set to learn an image's size, so that the limit applied is
// Pillow's, with the size in the refusal.
const ANY_SIZE = Number.MAX_SAFE_INTEGER;

/**
 * `imageDir` holds the copy's images and captions; `shownAs` names a file there as it lies in arbo's dataset dir.
 * `signal` stops the work between two files, and while an image is decoded or turned: that work, on Bun.Image's
 * own thread, is left to finish unobserved, and nothing it makes is written.
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
  const large: ImageSize[] = [];
  const report: DatasetReport = {
    captions: {
      trigger_added: 0, trigger_present: 0, trigger_moved: 0, images_without_caption: 0, cut: [],
      tokens_counted_by: target.tokens.by,
    },
    token_window: { tokens: ONE_WINDOW, longest: null },
    turned_upright: [],
    small: [],
    large,
    duplicates: [],
    warnings: folderWarnings(target),
  };
  const notes: FileNote[] = [];
  const byDigest = new Map<string, string[]>();
  for (const image of images) {
    signal?.throwIfAborted();
    const shown = shownAs(image);
    const found = await uprightImage(join(imageDir, image), shown, signal);
    if (found.turned) {
      report.turned_upright.push(shown);
      notes.push({ file: shown, did: "turned_upright", stored_as: shown });
    }
    const size = { image: shown, width: found.width, height: found.height };
    const { scale } = fitBucket(found.width, found.height, target.buckets);
    if (scale > 1) {
      report.small.push({ ...size, scale });
      notes.push({ file: shown, did: "small", scale });
    }
    if (found.width * found.height > PILLOW_WARNS_OVER) large.push(size);
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

async function uprightImage(path: string, shown: string, signal?: AbortSignal): Promise<ImageFacts> {
  const bytes = await Bun.file(path).bytes();
  const sha256 = sha256Hex(bytes);
  const orientation = readOrientation(bytes);
  const stored = await storedSize(bytes, shown, orientation, signal);
  // As stored, then as seen: a quarter turn swaps the sides.
  const quarter = uprightOf(orientation).rotate % 180 !== 0;
  const [width, height] = quarter ? [stored.height, stored.width] : [stored.width, stored.height];
  if (width * height > PILLOW_REFUSES_OVER) {
    throw new DatasetInvalid(
      `${shown} is ${width}x${height}, ${width * height} pixels: Pillow, which sd-scripts reads images with, ` +
        `refuses an image over ${PILLOW_REFUSES_OVER} pixels as a decompression bomb`,
    );
  }
  if (orientation !== 1) {
    const upright = await abandonedOnAbort(uprightPng(bytes, orientation), signal).catch((err: unknown) => {
      const code = imageErrorCode(err);
      if (code === null) throw err;
      const why = `stored turned (EXIF orientation ${orientation}) and the worker could not decode it to turn it`;
      throw new DatasetInvalid(`${shown} is ${why} upright (Bun.Image: ${code})`);
    });
    await writeBeside(path, upright, shown);
  }
  return { turned: orientation !== 1, width, height, sha256 };
}

// The size the header gives, read without decoding a pixel: by Bun.Image (PNG, JPEG, WebP, BMP; a GIF it reads is
// sized as Pillow sizes it, by its logical screen: gif-size.ts), or for TIFF, which Pillow reads and Bun.Image
// cannot on Linux, from its first IFD; such a file trains as it is, unless it must be turned. Anything else is
// refused, naming what was tried.
async function storedSize(
  bytes: Uint8Array, shown: string, orientation: Orientation, signal?: AbortSignal,
): Promise<{ width: number; height: number }> {
  const header = new Bun.Image(bytes, { autoOrient: false, maxPixels: ANY_SIZE }).metadata();
  const read = await abandonedOnAbort(header, signal).catch((err: unknown) => {
    if (imageErrorCode(err) === null) throw err;
    return imageErrorCode(err)!;
  });
  if (typeof read !== "string") return isGif(bytes) ? gifSize(bytes) : read;
  if (!isTiff(bytes)) {
    const tried = "Bun.Image reads PNG, JPEG, WebP, GIF and BMP, and the worker reads a TIFF's header";
    throw new DatasetInvalid(`${shown} is none of the image formats the worker reads (${tried}; Bun.Image: ${read})`);
  }
  const size = tiffSize(bytes);
  if (size === null) throw new DatasetInvalid(`${shown} is a TIFF whose first IFD gives no width and height`);
  if (orientation !== 1) {
    const why = `TIFF stored turned (EXIF orientation ${orientation}), which the worker cannot decode to turn upright`;
    throw new DatasetInvalid(`${shown} is a ${why}: stored as PNG or JPEG, it would be turned`);
  }
  return size;
}

function imageErrorCode(err: unknown): string | null {
  const code = (err as NodeJS.ErrnoException).code;
  return code !== undefined && code.startsWith("ERR_IMAGE") ? code : null;
}

// A cancel does not wait for Bun.Image, whose work runs on a thread of its own: the promise is answered with the
// signal's reason at once, and what the work makes later is dropped, never written.
function abandonedOnAbort<T>(work: Promise<T>, signal?: AbortSignal): Promise<T> {
  if (signal === undefined) return work;
  work.catch(() => {});
  return new Promise<T>((resolve, reject) => {
    const abort = () => reject(signal.reason);
    if (signal.aborted) return abort();
    signal.addEventListener("abort", abort, { once: true });
    work.then(resolve, reject).finally(() => signal.removeEventListener("abort", abort));
  });
}

// PNG keeps every decoded pixel; the file keeps its name (sd-scripts finds images by extension and Pillow reads
// them by content), so its caption and the record go on naming it as arbo did.
async function uprightPng(bytes: Uint8Array, orientation: Orientation): Promise<Uint8Array> {
  const { rotate, mirror } = uprightOf(orientation);
  const image = new Bun.Image(bytes, { autoOrient: false, maxPixels: PILLOW_REFUSES_OVER }).rotate(rotate);
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
  const plan = planCaptions(files, { ...target, count: target.tokens.count });
  report.token_window = { tokens: plan.window, longest: plan.longest };
  for (const caption of plan.captions) {
    signal?.throwIfAborted();
    const { shown: file, prefix } = caption;
    if (caption.did === "caption_kept") report.captions.trigger_present += 1;
    else {
      if (caption.did === "trigger_added") report.captions.trigger_added += 1;
      else report.captions.trigger_moved! += 1;
      await writeBeside(join(imageDir, caption.name), caption.text, file);
    }
    notes.push(
      caption.did === "caption_kept" ? { file, did: "caption_kept" }
      : caption.did === "trigger_added" ? { file, did: "trigger_added", prefix: prefix! }
      : { file, did: "trigger_moved", prefix: prefix! },
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

// `shown` names the file in an error (fs.ts's faultOn).
async function writeBeside(path: string, data: string | Uint8Array, shown: string): Promise<void> {
  const tmp = `${path}.upright-tmp`;
  try {
    await writeFile(tmp, data, { mode: 0o640, flag: "wx" });
    await rename(tmp, path);
  } catch (err) {
    await rm(tmp, { force: true });
    throw faultOn(shown, err);
  }
}
