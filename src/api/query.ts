import { z } from "zod";
import { JobFilter } from "../job.ts";
import type { Job } from "../store/job-store.ts";
import type { LogCursor } from "../job-dir/log-cut.ts";
import type { DetailItem } from "../request/schema.ts";
import { ApiError } from "./errors.ts";

// What the routes read from the URL. The OpenAPI document describes these same schemas, so each bound is
// written once; a refusal is one 422 naming every bad parameter, in the schema's order.
export const JOB_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const DIGITS = /^\d+$/;

// Only plain digits are read as a number: "1e2", "0x10", "+5" and " 5" are refused, not coerced.
function boundedInt(bounds: { min: number; max: number; default: number }) {
  const error = `must be an integer from ${bounds.min} to ${bounds.max}`;
  const digits = (raw: unknown) => (typeof raw === "string" && DIGITS.test(raw) ? Number(raw) : raw);
  const int = z.int({ error }).min(bounds.min, { error }).max(bounds.max, { error });
  return z.preprocess(digits, int.default(bounds.default));
}

export const ListQuery = z.object({
  status: z.enum(JobFilter.options, { error: `must be one of ${JobFilter.options.join(", ")}` }).optional(),
  limit: boundedInt({ min: 1, max: 100, default: 20 }),
  cursor: z
    .string()
    .transform((cursor, ctx) => {
      const key = decodeCursor(cursor);
      if (key === null) ctx.addIssue({ code: "custom", message: "is not a cursor this worker handed out" });
      return key ?? z.NEVER;
    })
    .optional(),
});
// A log's generation and a byte offset in it, as x-log-cursor hands them out.
const LOG_CURSOR = /^(0|[0-9a-f]{16})\.(0|[1-9]\d{0,14})$/;
export const LogQuery = z.object({
  lines: boundedInt({ min: 1, max: 5000, default: 200 }),
  after: z
    .string()
    .regex(LOG_CURSOR, { error: "is not a log cursor (the x-log-cursor of an earlier answer)" })
    .transform((cursor): LogCursor => {
      const [generation, offset] = cursor.split(".");
      return { generation: generation!, offset: Number(offset) };
    })
    .optional()
    .describe("the x-log-cursor of an earlier answer: answers what the log gained since, instead of its last lines"),
});
export const CurveQuery = z.object({ max_points: boundedInt({ min: 3, max: 10_000, default: 500 }) });

export function parseQuery<T extends z.ZodObject>(
  schema: T,
  req: { query(name: string): string | undefined },
): z.output<T> {
  const parsed = schema.safeParse(Object.fromEntries(Object.keys(schema.shape).map((name) => [name, req.query(name)])));
  if (parsed.success) return parsed.data;
  // One item per parameter: zod reports the fields in the schema's order.
  const named = new Set<string>();
  const detail = parsed.error.issues.flatMap((issue) => {
    const name = String(issue.path[0]);
    if (named.has(name)) return [];
    named.add(name);
    return [queryItem(name, issue.message)];
  });
  throw new ApiError(422, { detail });
}

const queryItem = (name: string, msg: string): DetailItem => ({ loc: ["query", name], msg, type: "value_error" });

export function queryRefusal(name: string, msg: string): ApiError {
  return new ApiError(422, { detail: [queryItem(name, msg)] });
}

export const encodeLogCursor = (cursor: LogCursor) => `${cursor.generation}.${cursor.offset}`;

// The cursor is the last row's sort key, opaque to clients.
export function encodeCursor(row: Job): string {
  return Buffer.from(JSON.stringify([row.created_at, row.id])).toString("base64url");
}

function decodeCursor(cursor: string): { createdAt: string; id: string } | null {
  try {
    const [createdAt, id] = JSON.parse(Buffer.from(cursor, "base64url").toString("utf8")) as unknown[];
    if (typeof createdAt === "string" && typeof id === "string" && JOB_ID.test(id)) return { createdAt, id };
  } catch {
    // falls through to the refusal
  }
  return null;
}
