import { MAX_JSON_DEPTH, scanJsonText } from "../request/json-text.ts";
import type { DetailItem } from "../request/schema.ts";
import { fail, ok, type Result } from "../result.ts";
import { ApiError } from "./errors.ts";

// What the routes read from a request's body and headers: the JSON body, bounded before it is parsed, and the
// Idempotency-Key header. (The URL's query parameters are query.ts's.)

export const MAX_BODY_BYTES = 64 * 1024;
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

// Bounded in size, time and nesting before JSON.parse sees a byte; what only the text shows (request/json-text.ts)
// comes back as faults, answered with the request's others.
export async function readJsonBody(req: Request, deadlineMs = BODY_DEADLINE_MS): Promise<JsonBody> {
  checkContentType(req.headers.get("content-type") ?? "");
  const declared = Number(req.headers.get("content-length") ?? "0");
  if (declared > MAX_BODY_BYTES) throw tooLarge();
  const text = decodeUtf8(await readLimited(req, deadlineMs));
  const scan = scanJsonText(text);
  if (scan.tooDeep) {
    throw new ApiError(413, { detail: `request body nests deeper than ${MAX_JSON_DEPTH} levels` }, CLOSE);
  }
  try {
    return { value: JSON.parse(text), faults: scan.faults };
  } catch (err) {
    throw new ApiError(400, { detail: `request body is not valid JSON: ${(err as Error).message}` });
  }
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
