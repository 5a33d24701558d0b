// Is a saved LoRA a complete safetensors file (see header.ts for the format), and are
// its float weights finite? One streaming pass over the file both hashes it and scans it (non-finite.ts),
// so a few hundred MB is never held in memory at once.
import { open, stat, type FileHandle } from "node:fs/promises";
import { fail, ok, type Result } from "../result.ts";
import { checkLayout, readHeaderFile } from "./header.ts";
import { scanNonFinite, type NonFinite, type NonFiniteScan } from "./non-finite.ts";

export type { NonFinite } from "./non-finite.ts";

interface VerifiedSafetensors {
  bytes: number;
  sha256: string;
  tensorCount: number;
  metadata: Record<string, string>;
  nonFinite: NonFinite;
}

interface SafetensorsProblem {
  reason: "missing" | "invalid";
  detail: string;
}

// ok: the structure is sound. A non-finite weight does not make it invalid: `nonFinite.tensors` > 0 is the
// caller's to judge (a NaN-poisoned LoRA is a failed run, not a corrupt file).
export type SafetensorsVerdict = Result<VerifiedSafetensors, SafetensorsProblem>;

// A multiple of 8, so every chunk but a short last one keeps aligned elements whole.
export const READ_CHUNK_BYTES = 4 * 1024 * 1024;

type Failure = { ok: false; error: SafetensorsProblem };

export async function verifySafetensors(path: string): Promise<SafetensorsVerdict> {
  const size = await regularFileSize(path);
  if (typeof size !== "number") return size;
  const read = await readHeaderFile(path, size);
  if (!read.ok) return invalid(read.error);
  const { header, dataBytes, dataStart } = read.value;
  const layoutProblem = checkLayout(header.tensors, dataBytes);
  if (layoutProblem !== null) return invalid(layoutProblem);
  const scan = scanNonFinite(header.tensors, dataStart);
  const digest = await hashAndScan(path, size, scan);
  if (digest.bytes !== size) {
    return invalid(`file changed size from ${size} to ${digest.bytes} bytes while being verified`);
  }
  return ok({
    bytes: size,
    sha256: digest.sha256,
    tensorCount: header.tensors.length,
    metadata: header.metadata,
    nonFinite: scan.result(),
  });
}

async function regularFileSize(path: string): Promise<number | Failure> {
  try {
    const info = await stat(path);
    if (info.isDirectory()) return invalid(`${path} is a directory, not a regular file`);
    if (!info.isFile()) return invalid(`${path} is not a regular file`);
    return info.size;
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === "ENOENT" || code === "ENOTDIR") return fail({ reason: "missing", detail: `no file at ${path}` });
    return invalid(`cannot read ${path}: ${code ?? String(error)}`);
  }
}

interface Digest {
  sha256: string;
  bytes: number;
}

// A file smaller than a chunk is read into a buffer of its size, rounded up to 8 bytes so that the chunks of a
// file that grows meanwhile stay on the scan's grid: a small LoRA does not cost a 4 MiB allocation.
async function hashAndScan(path: string, size: number, scan: NonFiniteScan): Promise<Digest> {
  const hasher = new Bun.CryptoHasher("sha256");
  const buffer = new Uint8Array(Math.min(READ_CHUNK_BYTES, Math.ceil((size + 1) / 8) * 8));
  const file = await open(path, "r");
  let position = 0;
  try {
    for (;;) {
      const length = await fill(file, buffer, position);
      if (length === 0) break;
      const chunk = buffer.subarray(0, length);
      hasher.update(chunk);
      scan.update(chunk, position);
      position += length;
    }
  } finally {
    await file.close();
  }
  return { sha256: hasher.digest("hex"), bytes: position };
}

// A short read would shift every later chunk off the 8-byte grid the fast scan relies on.
async function fill(file: FileHandle, buffer: Uint8Array, position: number): Promise<number> {
  let length = 0;
  while (length < buffer.byteLength) {
    const { bytesRead } = await file.read(buffer, length, buffer.byteLength - length, position + length);
    if (bytesRead === 0) break;
    length += bytesRead;
  }
  return length;
}

function invalid(detail: string): Failure {
  return fail({ reason: "invalid", detail });
}
