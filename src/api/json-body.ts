import { ApiError } from "./api-error.ts";

export const MAX_BODY_BYTES = 64 * 1024;

// Reads at most MAX_BODY_BYTES whatever Content-Length claims, then parses JSON.
export async function readJsonBody(req: Request): Promise<unknown> {
  const type = req.headers.get("content-type") ?? "";
  if (!/^application\/json\s*(;|$)/i.test(type)) {
    throw new ApiError(415, { detail: `Content-Type must be application/json, got ${type ? JSON.stringify(type.slice(0, 100)) : "none"}` });
  }
  const declared = Number(req.headers.get("content-length") ?? "0");
  if (declared > MAX_BODY_BYTES) throw tooLarge();
  const text = await readLimited(req);
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new ApiError(400, { detail: `request body is not valid JSON: ${(err as Error).message}` });
  }
}

async function readLimited(req: Request): Promise<string> {
  if (!req.body) return "";
  const chunks: Uint8Array[] = [];
  let size = 0;
  for await (const chunk of req.body) {
    size += chunk.byteLength;
    if (size > MAX_BODY_BYTES) throw tooLarge();
    chunks.push(chunk);
  }
  return new TextDecoder("utf-8", { fatal: false }).decode(Buffer.concat(chunks));
}

function tooLarge(): ApiError {
  return new ApiError(413, { detail: `request body is larger than ${MAX_BODY_BYTES} bytes` });
}
