import { open, readdir, stat } from "node:fs/promises";
import { join } from "node:path";
import type { Sample } from "../job.ts";
import { PNG_SIGNATURE } from "../png.ts";
import type { RunOutput } from "./checkpoints.ts";

// The preview images sd-scripts draws at the run's preview points (train_util.sample_image_inference): PNGs in
// <output_dir>/sample/ named <output_name>_<step:06d>_<index:02d>_<YYYYmmddHHMMSS>_<seed>.png. A sample is listed
// once it is a whole PNG file written by this run; only listed files are ever served.

// A PNG ends with an empty IEND chunk: length 0, the type, its CRC.
const IEND_CHUNK = Buffer.from([0, 0, 0, 0, 0x49, 0x45, 0x4e, 0x44, 0xae, 0x42, 0x60, 0x82]);

const sampleDir = (out: RunOutput) => join(out.dir, "sample");

// `known` and the whole samples of this run written since `sinceMs` that it does not hold yet, in step order.
export async function findSamples(out: RunOutput, sinceMs: number, known: Sample[]): Promise<Sample[]> {
  const pattern = new RegExp(`^${RegExp.escape(out.name)}_(\\d{6})_(\\d{2})_\\d{14}(?:_\\d+)?\\.png$`);
  const names = await readdir(sampleDir(out)).catch(() => [] as string[]);
  const found = [...known];
  for (const name of names) {
    const match = pattern.exec(name);
    const index = Number(match?.[2]);
    if (!match || found.some((s) => s.name === name)) continue;
    const path = join(sampleDir(out), name);
    const info = await stat(path).catch(() => null);
    if (!info?.isFile() || info.mtimeMs < sinceMs || !(await wholePng(path, info.size))) continue;
    found.push({ step: Number(match[1]), index, name, path, bytes: info.size });
  }
  return found.sort((a, b) => a.step - b.step || a.index - b.index);
}

async function wholePng(path: string, size: number): Promise<boolean> {
  if (size < PNG_SIGNATURE.length + IEND_CHUNK.length) return false;
  const file = await open(path, "r");
  try {
    const head = Buffer.alloc(PNG_SIGNATURE.length);
    const tail = Buffer.alloc(IEND_CHUNK.length);
    await file.read(head, 0, head.length, 0);
    await file.read(tail, 0, tail.length, size - tail.length);
    return head.equals(Buffer.from(PNG_SIGNATURE)) && tail.equals(IEND_CHUNK);
  } finally {
    await file.close();
  }
}
