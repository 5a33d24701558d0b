// The JSON header of a safetensors file: `{"__metadata__"?: {str: str}, "<tensor>": {dtype, shape,
// data_offsets: [begin, end]}, ...}`, offsets relative to the start of the data area.

export interface TensorEntry {
  name: string;
  dtype: string;
  begin: number;
  end: number;
}

export interface Header {
  tensors: TensorEntry[];
  metadata: Record<string, string>;
}

export type HeaderResult = { ok: true; header: Header } | { ok: false; detail: string };

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

export function parseHeader(bytes: Uint8Array): HeaderResult {
  try {
    return { ok: true, header: readHeader(decodeJson(bytes)) };
  } catch (error) {
    if (error instanceof HeaderError) return { ok: false, detail: error.message };
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
  if (dtypeBytes === undefined) throw new HeaderError(`tensor '${name}' has unknown dtype ${JSON.stringify(dtype)}`);
  if (!isIndexList(shape)) {
    throw new HeaderError(`tensor '${name}' has shape ${JSON.stringify(shape)}; expected an array of non-negative integers`);
  }
  if (!isIndexList(offsets) || offsets.length !== 2 || offsets[0]! > offsets[1]!) {
    throw new HeaderError(`tensor '${name}' has data_offsets ${JSON.stringify(offsets)}; expected [begin, end] with 0 <= begin <= end`);
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
