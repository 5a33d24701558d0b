// safetensors layout: an 8-byte little-endian header length N, N bytes of UTF-8 JSON
// (`__metadata__` first, then each tensor's dtype, shape and data_offsets into the data area),
// padded with spaces so the data area starts 8-byte aligned; then the tensors back to back to EOF.
import { rename, rm } from "node:fs/promises";
import { LENGTH_PREFIX_BYTES } from "./header.ts";

export type Dtype = "F16" | "BF16" | "F32" | "F64";

export interface Tensor {
  name: string;
  dtype: Dtype;
  shape: number[];
  data: Uint8Array;
}

const DTYPE_BYTES: Readonly<Record<Dtype, number>> = { F16: 2, BF16: 2, F32: 4, F64: 8 };
const ALIGNMENT = 8;

export async function writeSafetensors(
  path: string,
  tensors: Tensor[],
  metadata: Record<string, string>,
): Promise<void> {
  // A reader polling for the file never sees it half written.
  const partial = `${path}.tmp-${process.pid}`;
  try {
    await Bun.write(partial, new Blob(safetensorsParts(tensors, metadata)));
    await rename(partial, path);
  } catch (error) {
    await rm(partial, { force: true });
    throw error;
  }
}

// The file's bytes in order, without copying the tensors' data: length prefix, header, then each tensor.
export function safetensorsParts(tensors: Tensor[], metadata: Record<string, string>): Uint8Array[] {
  const header = encodeHeader(tensors, metadata);
  const prefix = new Uint8Array(LENGTH_PREFIX_BYTES);
  new DataView(prefix.buffer).setBigUint64(0, BigInt(header.byteLength), true);
  return [prefix, header, ...tensors.map((tensor) => tensor.data)];
}

function encodeHeader(tensors: Tensor[], metadata: Record<string, string>): Uint8Array {
  const entries: Record<string, unknown> = { __metadata__: metadata };
  let offset = 0;
  for (const tensor of tensors) {
    const end = offset + checkedByteLength(tensor);
    entries[tensor.name] = { dtype: tensor.dtype, shape: tensor.shape, data_offsets: [offset, end] };
    offset = end;
  }
  const json = JSON.stringify(entries);
  const length = Buffer.byteLength(json);
  return new TextEncoder().encode(json + " ".repeat((ALIGNMENT - (length % ALIGNMENT)) % ALIGNMENT));
}

function checkedByteLength(tensor: Tensor): number {
  const expected = tensor.shape.reduce((bytes, dim) => bytes * dim, DTYPE_BYTES[tensor.dtype]);
  if (tensor.data.byteLength !== expected) {
    const shape = `${tensor.dtype} ${JSON.stringify(tensor.shape)}`;
    throw new Error(`tensor '${tensor.name}' has ${tensor.data.byteLength} bytes but ${shape} needs ${expected}`);
  }
  return expected;
}
