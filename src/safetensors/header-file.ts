// Reads only the front of a safetensors file: the 8-byte little-endian header length N, then the N-byte
// JSON header. The data area after it (gigabytes, for a base model) is never touched here.
import { parseHeader, type Header } from "./header.ts";

export const LENGTH_PREFIX_BYTES = 8;
// sd-scripts headers are a few hundred KiB at most; a bigger claim means a corrupt prefix.
const MAX_HEADER_BYTES = 100 * 1024 * 1024;

export type HeaderFile = { ok: true; header: Header; dataStart: number; dataBytes: number } | { ok: false; detail: string };

export async function readHeaderFile(path: string, size: number): Promise<HeaderFile> {
  if (size < LENGTH_PREFIX_BYTES) return refused(`file is ${size} bytes, shorter than the 8-byte header length`);
  const file = Bun.file(path);
  const prefix = new DataView(await file.slice(0, LENGTH_PREFIX_BYTES).arrayBuffer());
  const length = prefix.getBigUint64(0, true);
  if (length + BigInt(LENGTH_PREFIX_BYTES) > BigInt(size)) return refused(`header length ${length} exceeds file size ${size}`);
  if (length > BigInt(MAX_HEADER_BYTES)) return refused(`header length ${length} exceeds the ${MAX_HEADER_BYTES}-byte limit`);
  const dataStart = LENGTH_PREFIX_BYTES + Number(length);
  const parsed = parseHeader(new Uint8Array(await file.slice(LENGTH_PREFIX_BYTES, dataStart).arrayBuffer()));
  if (!parsed.ok) return refused(parsed.detail);
  return { ok: true, header: parsed.header, dataStart, dataBytes: size - dataStart };
}

function refused(detail: string): HeaderFile {
  return { ok: false, detail };
}
