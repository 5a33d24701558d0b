import { accessSync, constants, realpathSync, statSync, type Stats } from "node:fs";
import { readdir } from "node:fs/promises";
import { basename, join } from "node:path";
import { fileKind } from "../fs.ts";
import { fail, ok, type Result } from "../result.ts";
import { isStrictlyInside } from "./contained-path.ts";
import type { Problem } from "./schema.ts";

// Every file the trainer would read, checked at dispatch: the images of the image dir (by extension) and their
// captions. sd-scripts reads whatever a name points to, so each must be a regular file that resolves inside the
// handoff root, within the bounds. The worker then copies exactly these into the job directory.
export const IMAGE_EXTENSIONS = [".png", ".jpg", ".jpeg", ".webp"];
export const CAPTION_EXTENSION = ".txt";
const KOHYA_FOLDER = /^\d+_\S.*$/;
/**
 * The most bytes a caption may hold. sd-scripts reads a caption file whole and trains on its first line, cut at the
 * longest context (some 1,000 bytes of words); no caption written for training nears this, and one past it is
 * refused by name.
 */
export const MAX_CAPTION_BYTES = 1024 * 1024;

interface DatasetBounds {
  max_files: number;
  max_bytes: number;
  max_file_bytes: number;
}

/** One file as checked: where it really is, and what it was (the copy must find the same inode and size). */
export interface DatasetFile {
  rel: string;
  real: string;
  dev: number;
  ino: number;
  size: number;
  /** Changed by any write or replacement, even one that reuses the inode number and keeps the size. */
  ctimeMs: number;
}

export interface Dataset {
  /** The kohya folder holding the images, or null when they lie directly in the dataset dir. */
  folder: string | null;
  files: DatasetFile[];
  bytes: number;
}

type Entry = { name: string; directory: boolean };

// `datasetDir` and `handoffRoot` are real paths (symbolic links resolved). The error's msg follows the path.
export async function scanDataset(
  datasetDir: string,
  handoffRoot: string,
  bounds: DatasetBounds,
): Promise<Result<Dataset, Problem>> {
  const top = await entries(datasetDir);
  if (!top.ok) return top;
  const direct = top.value.filter((e) => isImage(e.name));
  const folders = top.value.filter((e) => e.directory && KOHYA_FOLDER.test(e.name));
  if (direct.length === 0 && folders.length > 1) {
    const names = folders.map((f) => f.name).join(", ");
    const msg = `holds ${folders.length} kohya folders (${names}); exactly one is supported`;
    return fail({ msg, type: "dataset_ambiguous" });
  }
  const folder = direct.length === 0 ? (folders[0]?.name ?? null) : null;
  const inner = folder === null ? top : await entries(join(datasetDir, folder));
  if (!inner.ok) return inner;
  const images = inner.value.filter((e) => isImage(e.name)).map((e) => e.name).sort();
  if (images.length === 0) {
    const where = `directly or in one kohya folder "<repeats>_<trigger> <class>"`;
    const names = `${IMAGE_EXTENSIONS.join(" ")}, in lower or upper case, not hidden: what sd-scripts reads`;
    return fail({ msg: `holds no image (${names}) ${where}`, type: "dataset_empty" });
  }
  const names = new Set(inner.value.map((e) => e.name));
  // Two images of one stem (x.png, x.jpg) share x.txt, as sd-scripts reads it for both: it is copied once.
  const captions = new Set<string>();
  const wanted = images.flatMap((image) => {
    const caption = image.slice(0, image.lastIndexOf(".")) + CAPTION_EXTENSION;
    if (!names.has(caption) || captions.has(caption)) return [image];
    captions.add(caption);
    return [image, caption];
  });
  if (wanted.length > bounds.max_files) {
    return fail({
      msg: `holds ${wanted.length} images and captions; dataset.max_files allows ${bounds.max_files}`,
      type: "dataset_too_many_files",
    });
  }
  return checkFiles(datasetDir, folder, wanted, handoffRoot, bounds);
}

function checkFiles(
  datasetDir: string,
  folder: string | null,
  names: string[],
  handoffRoot: string,
  bounds: DatasetBounds,
): Result<Dataset, Problem> {
  const files: DatasetFile[] = [];
  let bytes = 0;
  for (const name of names) {
    const rel = folder === null ? name : `${folder}/${name}`;
    const file = checkFile(join(datasetDir, rel), rel, handoffRoot, bounds);
    if (!file.ok) return file;
    bytes += file.value.size;
    if (bytes > bounds.max_bytes) {
      return fail({
        msg: `holds more than ${bounds.max_bytes} bytes of images and captions (dataset.max_bytes)`,
        type: "dataset_too_large",
      });
    }
    files.push(file.value);
  }
  return ok({ folder, files, bytes });
}

// The message names the file relative to the dataset and never where a link points.
function checkFile(
  path: string,
  rel: string,
  handoffRoot: string,
  bounds: DatasetBounds,
): Result<DatasetFile, Problem> {
  let real: string;
  let st: Stats;
  try {
    real = realpathSync(path);
    st = statSync(real);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? "error";
    return fail({ msg: `${rel} cannot be read (${code})`, type: "dataset_file_unreadable" });
  }
  if (!isStrictlyInside(handoffRoot, real)) {
    const msg = `${rel} leads out of the handoff root through a symbolic link`;
    return fail({ msg, type: "dataset_file_outside_root" });
  }
  if (!st.isFile()) {
    return fail({ msg: `${rel} is ${fileKind(st)}, not a regular file`, type: "dataset_file_not_regular" });
  }
  if (st.size > bounds.max_file_bytes) {
    return fail({
      msg: `${rel} is ${st.size} bytes; dataset.max_file_bytes allows ${bounds.max_file_bytes}`,
      type: "dataset_file_too_large",
    });
  }
  if (rel.endsWith(CAPTION_EXTENSION) && st.size > MAX_CAPTION_BYTES) {
    return fail({
      msg: `${rel} is ${st.size} bytes; a caption may hold at most ${MAX_CAPTION_BYTES} (the trainer reads one line)`,
      type: "dataset_file_too_large",
    });
  }
  // Stat answers for a file whose permissions keep the worker from reading it; the copy would fail on it later.
  try {
    accessSync(real, constants.R_OK);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? "error";
    return fail({ msg: `${rel} cannot be read by the worker (${code})`, type: "dataset_file_unreadable" });
  }
  return ok({ rel, real, dev: st.dev, ino: st.ino, size: st.size, ctimeMs: st.ctimeMs });
}

async function entries(dir: string): Promise<Result<Entry[], Problem>> {
  try {
    return ok((await readdir(dir, { withFileTypes: true })).map((e) => ({ name: e.name, directory: e.isDirectory() })));
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? "error";
    return fail({ msg: `cannot be read (${code})`, type: "dataset_unreadable" });
  }
}

/**
 * As sd-scripts' glob_images finds them: "*" + each extension, in lower or upper case (".png", ".PNG", not ".Png"),
 * and "*" skips names that start with a dot. Anything else it would not see, and a run of only such files would
 * end "No data found." after minutes of loading.
 */
export function isImage(name: string): boolean {
  const file = basename(name);
  if (file.startsWith(".")) return false;
  return IMAGE_EXTENSIONS.some((ext) => file.endsWith(ext) || file.endsWith(ext.toUpperCase()));
}
