// The front of a safetensors file: an 8-byte little-endian header length N, then N bytes of JSON,
// `{"__metadata__"?: {str: str}, "<tensor>": {dtype, shape, data_offsets: [begin, end]}, ...}`, offsets
// relative to the start of the data area that follows. Only the front is read here: the data area
// (gigabytes, for a base model) is never touched.
import { fail, ok, type Result } from "../result.ts";

export interface TensorEntry {
  name: string;
  dtype: string;
  begin: number;
  end: number;
}

interface Header {
  tensors: TensorEntry[];
  metadata: Record<string, string>;
}

interface HeaderFile {
  header: Header;
  dataStart: number;
  dataBytes: number;
}

export const LENGTH_PREFIX_BYTES = 8;
// sd-scripts headers are a few hundred KiB at most; a bigger claim means a corrupt prefix.
export const MAX_HEADER_BYTES = 100 * 1024 * 1024;
const METADATA_KEY = "__metadata__";

const DTYPE_BYTES: Readonly<Record<string, number>> = {
  BOOL: 1,
  U8: 1,
  I8: 1,
  F8_E5M2: 1,
  F8_E4M3: 1,
  I16: 2,
  U16: 2,
  F16: 2,
  BF16: 2,
  I32: 4,
  U32: 4,
  F32: 4,
  F64: 8,
  I64: 8,
  U64: 8,
};

class HeaderError extends Error {}

export async function readHeaderFile(path: string, size: number): Promise<Result<HeaderFile>> {
  if (size < LENGTH_PREFIX_BYTES) return fail(`file is ${size} bytes, shorter than the 8-byte header length`);
  const file = Bun.file(path);
  const prefix = new DataView(await file.slice(0, LENGTH_PREFIX_BYTES).arrayBuffer());
  const length = prefix.getBigUint64(0, true);
  if (length + BigInt(LENGTH_PREFIX_BYTES) > BigInt(size)) {
    return fail(`header length ${length} exceeds file size ${size}`);
  }
  if (length > BigInt(MAX_HEADER_BYTES)) {
    return fail(`header length ${length} exceeds the ${MAX_HEADER_BYTES}-byte limit`);
  }
  const dataStart = LENGTH_PREFIX_BYTES + Number(length);
  const parsed = parseHeader(new Uint8Array(await file.slice(LENGTH_PREFIX_BYTES, dataStart).arrayBuffer()));
  if (!parsed.ok) return parsed;
  return ok({ header: parsed.value, dataStart, dataBytes: size - dataStart });
}

// The tensors' data_offsets must tile the data area exactly: starting at 0, no gaps, no overlaps, ending at
// EOF. A file that breaks this is what a crashed or truncated save leaves behind. null: it tiles.
export function checkLayout(tensors: readonly TensorEntry[], dataBytes: number): string | null {
  if (tensors.length === 0) return "no tensors";
  const sorted = tensors.toSorted((a, b) => a.begin - b.begin || a.end - b.end);
  for (const [index, tensor] of sorted.entries()) {
    const previous = sorted[index - 1];
    const covered = previous?.end ?? 0;
    if (tensor.begin > covered) {
      return `data bytes ${covered}..${tensor.begin} before tensor '${tensor.name}' belong to no tensor`;
    }
    if (previous !== undefined && tensor.begin < covered) {
      return (
        `tensor '${tensor.name}' starts at data byte ${tensor.begin}, ` +
        `inside tensor '${previous.name}' which ends at ${covered}`
      );
    }
  }
  // Sorted by begin with no overlaps, so the last tensor ends furthest.
  const covered = sorted.at(-1)?.end ?? 0;
  if (covered > dataBytes) {
    return `tensors end at data byte ${covered} but the data area holds only ${dataBytes} bytes`;
  }
  if (covered < dataBytes) {
    return `data area holds ${dataBytes - covered} bytes after the last tensor ends at ${covered}`;
  }
  return null;
}

function parseHeader(bytes: Uint8Array): Result<Header> {
  try {
    return ok(readHeader(decodeJson(bytes)));
  } catch (error) {
    if (error instanceof HeaderError) return fail(error.message);
    throw error;
  }
}

function decodeJson(bytes: Uint8Array): unknown {
  let text: string;
  try {
    text = new TextDecoder("utf-8", { fatal: true }).decode(bytes);
  } catch {
    throw new HeaderError("header is not valid UTF-8");
  }
  try {
    return JSON.parse(text);
  } catch {
    throw new HeaderError("header is not valid JSON");
  }
}

function readHeader(json: unknown): Header {
  if (!isPlainObject(json)) throw new HeaderError(`header is ${describe(json)}, not a JSON object`);
  const tensors: TensorEntry[] = [];
  let metadata: Record<string, string> = {};
  for (const [name, value] of Object.entries(json)) {
    if (name === METADATA_KEY) metadata = readMetadata(value);
    else tensors.push(readTensor(name, value));
  }
  return { tensors, metadata };
}

function readMetadata(value: unknown): Record<string, string> {
  if (!isPlainObject(value)) throw new HeaderError(`${METADATA_KEY} is ${describe(value)}, not an object`);
  for (const [key, entry] of Object.entries(value)) {
    if (typeof entry !== "string") {
      throw new HeaderError(`${METADATA_KEY} value for key '${key}' is ${describe(entry)}, not a string`);
    }
  }
  return value as Record<string, string>;
}

function readTensor(name: string, value: unknown): TensorEntry {
  if (!isPlainObject(value)) throw new HeaderError(`tensor '${name}' is ${describe(value)}, not an object`);
  const { dtype, shape, data_offsets: offsets } = value;
  const dtypeBytes = typeof dtype === "string" ? DTYPE_BYTES[dtype] : undefined;
  if (dtypeBytes === undefined) {
    throw new HeaderError(`tensor '${name}' has unknown dtype ${JSON.stringify(dtype)}`);
  }
  if (!isIndexList(shape)) {
    throw new HeaderError(
      `tensor '${name}' has shape ${JSON.stringify(shape)}; expected an array of non-negative integers`,
    );
  }
  if (!isIndexList(offsets) || offsets.length !== 2 || offsets[0]! > offsets[1]!) {
    throw new HeaderError(
      `tensor '${name}' has data_offsets ${JSON.stringify(offsets)}; expected [begin, end] with 0 <= begin <= end`,
    );
  }
  const [begin, end] = offsets as [number, number];
  const needed = shape.reduce((bytes, dim) => bytes * BigInt(dim), BigInt(dtypeBytes));
  if (BigInt(end - begin) !== needed) {
    throw new HeaderError(
      `tensor '${name}' spans ${end - begin} bytes but ${dtype} ${JSON.stringify(shape)} needs ${needed}`,
    );
  }
  return { name, dtype: dtype as string, begin, end };
}

function isIndexList(value: unknown): value is number[] {
  return Array.isArray(value) && value.every((item) => Number.isSafeInteger(item) && item >= 0);
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function describe(value: unknown): string {
  if (Array.isArray(value)) return "a JSON array";
  if (value === null) return "null";
  return `a ${typeof value}`;
}
