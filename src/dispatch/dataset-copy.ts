import { constants, readdirSync } from "node:fs";
import { type FileHandle, link, lstat, mkdir, open, readdir } from "node:fs/promises";
import { dirname, extname, join } from "node:path";
import { faultOn, fileKind } from "../fs.ts";
import { type Dataset, type DatasetFile, IMAGE_EXTENSIONS } from "../request/dataset.ts";

// The dataset the trainer reads is the one that was checked: each checked file is copied into the job directory,
// opened without following a symbolic link at its last component and refused unless it is the very file (device,
// inode, size and ctime, so a replacement that reuses the inode number is caught too) the check saw. A swap after
// the check is caught here or lands in arbo's folder, which the trainer never reads.
// O_NONBLOCK: a FIFO swapped in opens at once (and is refused) rather than holding the copy until a writer comes.
const CHUNK = 1024 * 1024;
const OPEN_FLAGS = constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK;

export interface DatasetCopy {
  files: number;
  bytes: number;
  /** sha256 over each file's relative path, size and sha256, in path order: equal datasets, equal hashes. */
  sha256: string;
}

/** A checked file that is no longer what was checked: arbo's, not the job directory's, doing. */
export class DatasetChanged extends Error {
  constructor(readonly rel: string, why?: string) {
    super(`${rel} changed after it was checked${why === undefined ? "" : `: ${why}`}`);
  }
}

// `signal` stops the copy between two chunks (a cancel while the job prepares): it throws the signal's reason.
export async function snapshotDataset(dataset: Dataset, dest: string, signal?: AbortSignal): Promise<DatasetCopy> {
  const summary = new Bun.CryptoHasher("sha256");
  for (const file of dataset.files) {
    const to = join(dest, dataset.folder === null ? "images" : "", file.rel);
    const digest = await copyChecked(file, to, signal).catch((err: unknown) => Promise.reject(faultOn(file.rel, err)));
    summary.update(`${file.rel}\0${file.size}\0${digest}\n`);
  }
  return { files: dataset.files.length, bytes: dataset.bytes, sha256: summary.digest("hex") };
}

async function copyChecked(file: DatasetFile, to: string, signal?: AbortSignal): Promise<string> {
  const from = await open(file.real, OPEN_FLAGS).catch(async (err: NodeJS.ErrnoException) => {
    const why = await openFailure(file.real, err);
    throw why === null ? err : new DatasetChanged(file.rel, why);
  });
  try {
    const st = await from.stat();
    if (!st.isFile()) throw new DatasetChanged(file.rel, `it is ${fileKind(st)} now, not a regular file`);
    const same = st.dev === file.dev && st.ino === file.ino && st.size === file.size && st.ctimeMs === file.ctimeMs;
    if (!same) throw new DatasetChanged(file.rel);
    await mkdir(dirname(to), { recursive: true, mode: 0o750 });
    const out = await open(to, "wx", 0o640);
    try {
      return await pump(from, out, file, signal);
    } finally {
      await out.close();
    }
  } finally {
    await from.close();
  }
}

// The file was there, regular and readable when it was checked: what keeps it from opening now was done to it
// since. Null for a fault of the worker's own (too many open files, say).
async function openFailure(path: string, err: NodeJS.ErrnoException): Promise<string | null> {
  if (err.code === "EACCES" || err.code === "EPERM") return `the worker may no longer read it (${err.code})`;
  const st = await lstat(path).catch(() => null);
  if (st === null) return "it is gone";
  return st.isFile() ? null : `it is ${fileKind(st)} now, not a regular file`;
}

async function pump(from: FileHandle, out: FileHandle, file: DatasetFile, signal?: AbortSignal): Promise<string> {
  const hash = new Bun.CryptoHasher("sha256");
  const buf = Buffer.alloc(CHUNK);
  let copied = 0;
  for (;;) {
    signal?.throwIfAborted();
    const n = (await from.read(buf, 0, CHUNK, copied)).bytesRead;
    if (n === 0) break;
    hash.update(buf.subarray(0, n));
    await out.write(buf, 0, n);
    copied += n;
  }
  // Grown, cut or rewritten in place while being copied: not the file that was checked, and maybe a torn copy.
  const after = await from.stat();
  if (copied !== file.size || after.size !== file.size || after.ctimeMs !== file.ctimeMs) {
    throw new DatasetChanged(file.rel);
  }
  return hash.digest("hex");
}

// A predecessor's copy as a resume reads it: the copy dir, its kohya folder (or none) and how many images.
export interface PredecessorCopy {
  datasetDir: string;
  dataset: Dataset;
  images: number;
}

// The copy holds exactly one folder: the kohya folder by its name, or images/ for images that lay directly in
// the dataset dir (snapshotImageDir). Null when it is gone or not what a snapshot leaves.
export function readCopy(dir: string): PredecessorCopy | null {
  let top: string[];
  try {
    top = readdirSync(dir);
  } catch {
    return null;
  }
  const [folder] = top;
  if (top.length !== 1 || folder === undefined) return null;
  const isImage = (name: string) => IMAGE_EXTENSIONS.includes(extname(name).toLowerCase());
  const images = readdirSync(join(dir, folder)).filter(isImage).length;
  if (images === 0) return null;
  return { datasetDir: dir, dataset: { folder: folder === "images" ? null : folder, files: [], bytes: 0 }, images };
}

// A resume reads its predecessor's copy (and the latents cached beside it) through hard links in its own job
// directory: no byte is copied, and pruning the predecessor's directory leaves the resumed run's intact.
export async function linkSnapshot(from: string, to: string): Promise<void> {
  await mkdir(to, { recursive: true, mode: 0o750 });
  for (const entry of await readdir(from, { withFileTypes: true })) {
    const source = join(from, entry.name);
    if (entry.isDirectory()) await linkSnapshot(source, join(to, entry.name));
    else if (entry.isFile()) await link(source, join(to, entry.name));
  }
}
