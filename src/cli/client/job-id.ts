import { UsageError } from "../args.ts";
import { ClientError } from "./exit.ts";
import type { WorkerClient } from "./worker-client.ts";

// A job is named by its id, or by the start of it (at least SHORT_ID characters, what a narrow `jobs` shows),
// as long as exactly one job's id starts so.

export const SHORT_ID = 8;
const FULL_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const START_OF_ID = /^[0-9a-f]{8}[0-9a-f-]{0,27}$/;
const PAGE = 100;

/** The job id `text` names: itself when whole (or not an id at all: the worker then says no such job). */
export async function resolveJobId(client: WorkerClient, text: string): Promise<string> {
  if (FULL_ID.test(text) || !START_OF_ID.test(text)) return text;
  const found: string[] = [];
  // Newest first, through every page: a second match anywhere makes the short form ambiguous.
  for (let cursor: string | undefined; found.length < 2; ) {
    const page = await client.jobs({ limit: PAGE, ...(cursor === undefined ? {} : { cursor }) });
    found.push(...page.jobs.map((j) => j.worker_job_id).filter((id) => id.startsWith(text)));
    if (page.next_cursor === null) break;
    cursor = page.next_cursor;
  }
  if (found.length === 1) return found[0]!;
  if (found.length === 0) throw new ClientError("no_such_job", `no such job: no job id starts with ${text}`);
  throw new UsageError(`more than one job id starts with ${text} (${found.join(", ")}, …): give more of it`);
}
