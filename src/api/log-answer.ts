import type { Context } from "hono";
import { readAfter, tailWithCursor } from "../job-dir/log-cursor.ts";
import { ApiError } from "./errors.ts";
import { LOG_CURSOR_HEADER, LOG_CUT_HEADER } from "./openapi.ts";
import { encodeLogCursor, LogQuery, parseQuery, queryRefusal } from "./query.ts";

// GET /train/{id}/log: the last lines, or what the log gained since a cursor. x-log-cursor is where the next read
// goes on from; x-log-cut says the shim cut the log since the cursor was handed out (what it dropped is gone, and
// its marker line says how much). A cut under way takes milliseconds and is waited out.
const SETTLE_WAIT_MS = 2000;
const TEXT = { "content-type": "text/plain; charset=UTF-8" };

export async function logAnswer(c: Context, log: string): Promise<Response> {
  const { lines, after } = parseQuery(LogQuery, c.req);
  if (after === undefined) {
    const tail = await tailWithCursor(log, lines, SETTLE_WAIT_MS);
    const headers: Record<string, string> = { ...TEXT };
    if (tail.cursor !== null) headers[LOG_CURSOR_HEADER] = encodeLogCursor(tail.cursor);
    return c.body(tail.lines.length > 0 ? `${tail.lines.join("\n")}\n` : "", 200, headers);
  }
  if (c.req.query("lines") !== undefined) {
    throw queryRefusal("lines", "cannot be combined with after, which answers all the log gained since the cursor");
  }
  const read = await readAfter(log, after, SETTLE_WAIT_MS);
  switch (read.kind) {
    case "bytes": {
      const headers: Record<string, string> = { ...TEXT, [LOG_CURSOR_HEADER]: encodeLogCursor(read.next) };
      if (read.cut) headers[LOG_CUT_HEADER] = "true";
      return c.body(read.bytes, 200, headers);
    }
    case "unknown":
      throw queryRefusal("after", `is not a cursor of this log: it ${read.why}`);
    case "unrecorded":
      throw queryRefusal(
        "after",
        "cannot be followed: this job's log has no record of its cuts (its run was started by an older worker); " +
          "read its last lines instead",
      );
    case "unsettled":
      throw new ApiError(503, {
        detail: "a cut of the log has not finished (its shim may have been stopped in it), so no offset in it can " +
          "be trusted; its last lines can still be read",
      });
  }
}
