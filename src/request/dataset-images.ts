import { readdir } from "node:fs/promises";
import { join } from "node:path";

export const IMAGE_EXTENSIONS = [".png", ".jpg", ".jpeg", ".webp"];
const KOHYA_FOLDER = /^\d+_\S.*$/;

export type ImageDir = { ok: true; dir: string; count: number } | { ok: false; msg: string; type: string };

// Images directly in the dataset dir, or in exactly one kohya folder `<repeats>_<trigger> <class>`.
export async function findImageDir(datasetDir: string): Promise<ImageDir> {
  const entries = await readdir(datasetDir, { withFileTypes: true }).catch(unreadable);
  if (!Array.isArray(entries)) return entries;
  const direct = entries.filter((e) => e.isFile() && isImage(e.name)).length;
  if (direct > 0) return { ok: true, dir: datasetDir, count: direct };
  const folders = entries.filter((e) => e.isDirectory() && KOHYA_FOLDER.test(e.name));
  if (folders.length > 1) {
    return { ok: false, msg: `holds ${folders.length} kohya folders (${folders.map((f) => f.name).join(", ")}); exactly one is supported`, type: "dataset_ambiguous" };
  }
  const [folder] = folders;
  if (folder) {
    const dir = join(datasetDir, folder.name);
    const inner = await readdir(dir, { withFileTypes: true }).catch(unreadable);
    if (!Array.isArray(inner)) return inner;
    const count = inner.filter((e) => e.isFile() && isImage(e.name)).length;
    if (count > 0) return { ok: true, dir, count };
  }
  return {
    ok: false,
    msg: `holds no image (${IMAGE_EXTENSIONS.join(" ")}) directly or in one kohya folder "<repeats>_<trigger> <class>"`,
    type: "dataset_empty",
  };
}

function unreadable(err: NodeJS.ErrnoException): ImageDir {
  return { ok: false, msg: `cannot be read (${err.code ?? "error"})`, type: "dataset_unreadable" };
}

function isImage(name: string): boolean {
  const lower = name.toLowerCase();
  return IMAGE_EXTENSIONS.some((ext) => lower.endsWith(ext));
}
