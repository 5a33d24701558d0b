// safetensors layout: bytes 0..8 hold N, the header length as a little-endian u64; bytes 8..8+N
// hold a UTF-8 JSON header (see header.ts); the rest is the data area, which the tensors'
// data_offsets must tile exactly — starting at 0, no gaps, no overlaps, ending at EOF.
// A file that breaks any of this is what a crashed or truncated save leaves behind.
import { stat } from "node:fs/promises";
import { parseHeader, type Header, type TensorEntry } from "./header.ts";

export type SafetensorsVerdict =
  | { ok: true; bytes: number; sha256: string; tensorCount: number; metadata: Record<string, string> }
  | { ok: false; reason: "missing" | "invalid"; detail: string };

const LENGTH_PREFIX_BYTES = 8;
// sd-scripts headers are a few hundred KiB at most; a bigger claim means a corrupt prefix.
const MAX_HEADER_BYTES = 100 * 1024 * 1024;

type Failure = Extract<SafetensorsVerdict, { ok: false }>;

export async function verifySafetensors(path: string): Promise<SafetensorsVerdict> {
  const size = await regularFileSize(path);
  if (typeof size !== "number") return size;
  const header = await readHeader(path, size);
  if ("reason" in header) return header;
  const layoutProblem = checkLayout(header.header.tensors, header.dataBytes);
  if (layoutProblem !== null) return invalid(layoutProblem);
  const digest = await hashFile(path);
  if (digest.bytes !== size) return invalid(`file changed size from ${size} to ${digest.bytes} bytes while being verified`);
  return {
    ok: true,
    bytes: size,
    sha256: digest.sha256,
    tensorCount: header.header.tensors.length,
    metadata: header.header.metadata,
  };
}

async function regularFileSize(path: string): Promise<number | Failure> {
  try {
    const info = await stat(path);
    if (info.isDirectory()) return invalid(`${path} is a directory, not a regular file`);
    if (!info.isFile()) return invalid(`${path} is not a regular file`);
    return info.size;
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === "ENOENT" || code === "ENOTDIR") return { ok: false, reason: "missing", detail: `no file at ${path}` };
    return invalid(`cannot read ${path}: ${code ?? String(error)}`);
  }
}

async function readHeader(path: string, size: number): Promise<{ header: Header; dataBytes: number } | Failure> {
  if (size < LENGTH_PREFIX_BYTES) return invalid(`file is ${size} bytes, shorter than the 8-byte header length`);
  const file = Bun.file(path);
  const prefix = new DataView(await file.slice(0, LENGTH_PREFIX_BYTES).arrayBuffer());
  const length = prefix.getBigUint64(0, true);
  if (length + BigInt(LENGTH_PREFIX_BYTES) > BigInt(size)) return invalid(`header length ${length} exceeds file size ${size}`);
  if (length > BigInt(MAX_HEADER_BYTES)) return invalid(`header length ${length} exceeds the ${MAX_HEADER_BYTES}-byte limit`);
  const headerEnd = LENGTH_PREFIX_BYTES + Number(length);
  const parsed = parseHeader(new Uint8Array(await file.slice(LENGTH_PREFIX_BYTES, headerEnd).arrayBuffer()));
  if (!parsed.ok) return invalid(parsed.detail);
  return { header: parsed.header, dataBytes: size - headerEnd };
}

function checkLayout(tensors: TensorEntry[], dataBytes: number): string | null {
  if (tensors.length === 0) return "no tensors";
  const sorted = tensors.toSorted((a, b) => a.begin - b.begin || a.end - b.end);
  for (const [index, tensor] of sorted.entries()) {
    const previous = sorted[index - 1];
    const covered = previous?.end ?? 0;
    if (tensor.begin > covered) {
      return `data bytes ${covered}..${tensor.begin} before tensor '${tensor.name}' belong to no tensor`;
    }
    if (previous !== undefined && tensor.begin < covered) {
      return `tensor '${tensor.name}' starts at data byte ${tensor.begin}, inside tensor '${previous.name}' which ends at ${covered}`;
    }
  }
  // Sorted by begin with no overlaps, so the last tensor ends furthest.
  const covered = sorted.at(-1)?.end ?? 0;
  if (covered > dataBytes) return `tensors end at data byte ${covered} but the data area holds only ${dataBytes} bytes`;
  if (covered < dataBytes) return `data area holds ${dataBytes - covered} bytes after the last tensor ends at ${covered}`;
  return null;
}

async function hashFile(path: string): Promise<{ sha256: string; bytes: number }> {
  const hasher = new Bun.CryptoHasher("sha256");
  let bytes = 0;
  for await (const chunk of Bun.file(path).stream()) {
    hasher.update(chunk);
    bytes += chunk.byteLength;
  }
  return { sha256: hasher.digest("hex"), bytes };
}

function invalid(detail: string): Failure {
  return { ok: false, reason: "invalid", detail };
}
