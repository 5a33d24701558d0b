import { type DetailItem, fieldPathError } from "../request/schema.ts";
import { fail, ok, type Result } from "../result.ts";
import { ApiError } from "./errors.ts";

// What the routes read from a request's body and headers: the JSON body, bounded before it is parsed, and the
// Idempotency-Key header. (The URL's query parameters are query.ts's.)

export const MAX_BODY_BYTES = 64 * 1024;
export const MAX_JSON_DEPTH = 32;
// A LAN client sends 64 KiB in well under this; a client trickling its body cannot hold a request open longer.
const BODY_DEADLINE_MS = 10_000;

// The rest of a refused body is never read: close the connection rather than drain it.
const CLOSE = { Connection: "close" };
const JSON_TYPE = /^application\/json\s*(;|$)/i;
const CHARSET = /;\s*charset\s*=\s*"?([^";\s]+)/i;

/** A JSON body, with the 422 items of what only its text shows: they join the request's other faults. */
export interface JsonBody {
  value: unknown;
  faults: DetailItem[];
}

// A body that may be left out: none at all (no bytes) reads as an empty object, anything else as readJsonBody does.
export async function readOptionalJsonBody(req: Request, deadlineMs = BODY_DEADLINE_MS): Promise<JsonBody> {
  const declared = req.headers.get("content-length");
  const chunked = req.headers.get("transfer-encoding") !== null;
  if (req.body === null || (declared === "0" && !chunked)) return { value: {}, faults: [] };
  return readJsonBody(req, deadlineMs);
}

// Bounded in size, time and nesting before JSON.parse sees a byte. Duplicate keys and non-integer number literals
// are found here, where the text still shows them (every number of a request is an integer: `10.0` parses to 10,
// so a client that sends it holds a float where an integer belongs, and is told rather than silently rounded).
export async function readJsonBody(req: Request, deadlineMs = BODY_DEADLINE_MS): Promise<JsonBody> {
  checkContentType(req.headers.get("content-type") ?? "");
  const declared = Number(req.headers.get("content-length") ?? "0");
  if (declared > MAX_BODY_BYTES) throw tooLarge();
  const text = decodeUtf8(await readLimited(req, deadlineMs));
  const scan = scanJson(text);
  if (scan.tooDeep) {
    throw new ApiError(413, { detail: `request body nests deeper than ${MAX_JSON_DEPTH} levels` }, CLOSE);
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw new ApiError(400, { detail: `request body is not valid JSON: ${(err as Error).message}` });
  }
  const repeated = "appears more than once in the object; each key may appear once";
  const faults = [
    ...scan.duplicateKeys.map((key) => fieldPathError(key, repeated, "duplicate_key")),
    ...scan.nonIntegerNumbers.map(({ path, literal }) =>
      fieldPathError(path, `must be an integer, got the number literal ${literal}`, "type_error")),
  ];
  return { value, faults };
}

function checkContentType(type: string): void {
  const shown = type ? JSON.stringify(type.slice(0, 100)) : "none";
  if (!JSON_TYPE.test(type)) throw new ApiError(415, { detail: `Content-Type must be application/json, got ${shown}` });
  const charset = CHARSET.exec(type)?.[1]?.toLowerCase();
  if (charset !== undefined && charset !== "utf-8" && charset !== "utf8") {
    const shownCharset = JSON.stringify(charset.slice(0, 40));
    throw new ApiError(415, { detail: `the JSON body must be UTF-8, got charset ${shownCharset}` });
  }
}

async function readLimited(req: Request, deadlineMs: number): Promise<Uint8Array> {
  if (!req.body) return new Uint8Array();
  const reader = req.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  let timer: Timer | undefined;
  const deadline = new Promise<never>((_, reject) => {
    const late = () => new ApiError(408, { detail: `request body not received within ${deadlineMs / 1000} s` }, CLOSE);
    timer = setTimeout(() => reject(late()), deadlineMs);
  });
  try {
    for (;;) {
      const { done, value } = await Promise.race([reader.read(), deadline]);
      if (done) return Buffer.concat(chunks);
      size += value.byteLength;
      if (size > MAX_BODY_BYTES) throw tooLarge();
      chunks.push(value);
    }
  } finally {
    clearTimeout(timer);
    reader.cancel().catch(() => {});
  }
}

function decodeUtf8(bytes: Uint8Array): string {
  try {
    return new TextDecoder("utf-8", { fatal: true, ignoreBOM: false }).decode(bytes);
  } catch {
    throw new ApiError(400, { detail: "request body is not valid UTF-8" });
  }
}

function tooLarge(): ApiError {
  return new ApiError(413, { detail: `request body is larger than ${MAX_BODY_BYTES} bytes` }, CLOSE);
}

type JsonPath = Array<string | number>;
type JsonScan =
  | { tooDeep: true }
  | { tooDeep: false; duplicateKeys: JsonPath[]; nonIntegerNumbers: Array<{ path: JsonPath; literal: string }> };

interface Frame {
  keys: Set<string> | null; // null for an array
  at: string | number; // the key or index of the value being read
  expectKey: boolean;
}

// One pass over the raw text, before JSON.parse, for what the parsed value can no longer tell:
// how deep it nests, every key an object repeats (JSON.parse silently keeps the last), and every
// number written as a fraction or exponent (`10.0` and `1e2` parse to integers; `1e400` to Infinity).
function scanJson(text: string): JsonScan {
  const stack: Frame[] = [];
  const duplicateKeys: JsonPath[] = [];
  const nonIntegerNumbers: Array<{ path: JsonPath; literal: string }> = [];
  const here = () => stack.map((f) => f.at);
  for (let i = 0; i < text.length; i++) {
    const ch = text[i]!;
    const top = stack[stack.length - 1];
    if (ch === '"') {
      const end = stringEnd(text, i);
      if (top?.keys && top.expectKey) {
        top.expectKey = false;
        const key = decodeKey(text.slice(i, end + 1));
        if (key !== null) top.at = key;
        if (key !== null && top.keys.has(key)) duplicateKeys.push(here());
        if (key !== null) top.keys.add(key);
      }
      i = end;
    } else if (ch === "{" || ch === "[") {
      if (stack.length >= MAX_JSON_DEPTH) return { tooDeep: true };
      stack.push({ keys: ch === "{" ? new Set() : null, at: ch === "{" ? "" : 0, expectKey: ch === "{" });
    } else if (ch === "}" || ch === "]") {
      stack.pop();
    } else if (ch === "," && top) {
      if (top.keys) top.expectKey = true;
      else top.at = (top.at as number) + 1;
    } else if (/[-0-9]/.test(ch)) {
      const literal = /^-?[0-9.eE+-]+/.exec(text.slice(i, i + 400))![0];
      if (/[.eE]/.test(literal)) nonIntegerNumbers.push({ path: here(), literal: literal.slice(0, 40) });
      i += literal.length - 1;
    }
  }
  return { tooDeep: false, duplicateKeys, nonIntegerNumbers };
}

// Index of the closing quote, honouring backslash escapes; the end of the text if it never closes.
function stringEnd(text: string, open: number): number {
  for (let j = open + 1; j < text.length; j++) {
    if (text[j] === "\\") j++;
    else if (text[j] === '"') return j;
  }
  return text.length;
}

function decodeKey(literal: string): string | null {
  try {
    return JSON.parse(literal) as string;
  } catch {
    return null; // malformed: JSON.parse of the whole body answers 400
  }
}

const IDEMPOTENCY_KEY = /^[\x21-\x7e]{1,255}$/;

// A header value used as a database key: printable ASCII, bounded, or the 422 item naming the header.
export function idempotencyKeyOf(raw: string | undefined): Result<string | null, DetailItem> {
  if (raw === undefined) return ok(null);
  if (IDEMPOTENCY_KEY.test(raw)) return ok(raw);
  const msg = "must be 1-255 printable ASCII characters without spaces";
  return fail({ loc: ["header", "Idempotency-Key"], msg, type: "value_error" });
}

/** The key to dispatch with, and the faults of the body and the header together: one 422 answers them all. */
export function sentWith(key: Result<string | null, DetailItem>, body: JsonBody) {
  return { key: key.ok ? key.value : null, faults: key.ok ? body.faults : [...body.faults, key.error] };
}
