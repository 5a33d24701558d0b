import { JobStatus as JobStatusEnum } from "../../../job.ts";
import { positiveInt, UsageError } from "../../args.ts";
import { jobLine, jsonText } from "../format.ts";
import type { ClientCommand } from "../run.ts";
import { EXIT, type JobStatus } from "../worker-client.ts";

const STATUSES: readonly JobStatus[] = JobStatusEnum.options;
const DEFAULT_LIMIT = 20;
const PAGE_MAX = 100; // the worker's bound on one page

export const jobs: ClientCommand = {
  usage: "jobs [--status STATUS] [--limit N] [--json]",
  help: `Lists recent jobs, newest first, one line each: id, status, steps, loss, tier@device, created, output
name, error_code. --status keeps one of ${STATUSES.join(", ")}; --limit N (default ${DEFAULT_LIMIT}) pages
through the worker's list as needed. --json: one job record per line.
Exit: 0.`,
  values: ["status", "limit"],
  flags: ["json"],
  async run({ client, out, options }) {
    if (options.positional.length > 0) throw new UsageError("jobs takes no arguments");
    const status = options.values.status;
    if (status !== undefined && !STATUSES.includes(status as JobStatus)) {
      throw new UsageError(`--status must be one of ${STATUSES.join(", ")}, got ${JSON.stringify(status)}`);
    }
    const json = options.flags.has("json");
    let remaining = positiveInt(options, "limit") ?? DEFAULT_LIMIT;
    let cursor: string | undefined;
    let listed = 0;
    while (remaining > 0) {
      const page = await client.jobs({ status, limit: Math.min(remaining, PAGE_MAX), cursor });
      for (const job of page.jobs) out.write(`${json ? jsonText(job) : jobLine(job)}\n`);
      listed += page.jobs.length;
      remaining -= page.jobs.length;
      if (page.next_cursor === null || page.jobs.length === 0) break;
      cursor = page.next_cursor;
    }
    if (listed === 0 && !json) out.write(`no ${status ? `${status} ` : ""}jobs\n`);
    return EXIT.ok;
  },
};
