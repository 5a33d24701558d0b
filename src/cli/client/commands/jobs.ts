import { JobFilter } from "../../../job.ts";
import { positiveInt, UsageError } from "../../args.ts";
import { jsonText } from "../format.ts";
import { jobTable } from "../job-table.ts";
import type { ClientCommand } from "../command.ts";
import { EXIT } from "../exit.ts";
import type { JobView } from "../worker-client.ts";

const FILTERS: readonly string[] = JobFilter.options;
const DEFAULT_LIMIT = 20;
const PAGE_MAX = 100; // the worker's bound on one page

export const jobs: ClientCommand = {
  help: `Lists recent jobs, newest first, one line each under a header row: id, status, steps, loss, tier@device,
created, output name, error_code. On a narrow terminal the date is shortened and loss, tier@device, the date and
the output name are left out as needed, from the header too (a pipe gets every column, and the header); a paused
job's status reads paused, and one a resume continued reads resumed. --status keeps one of ${FILTERS.join(", ")}
(paused: stopped right after a saved state, not resumed yet; resumable: failed or cancelled with a state, not
resumed yet);
--limit N (default ${DEFAULT_LIMIT}) pages through the worker's list as needed. --json: one job record per line.
Exit: 0.`,
  values: ["status", "limit"],
  flags: ["json"],
  async run({ client, out, options }) {
    if (options.positional.length > 0) throw new UsageError("jobs takes no arguments");
    const status = options.values.status;
    if (status !== undefined && !FILTERS.includes(status)) {
      throw new UsageError(`--status must be one of ${FILTERS.join(", ")}, got ${JSON.stringify(status)}`);
    }
    const json = options.flags.has("json");
    let remaining = positiveInt(options, "limit") ?? DEFAULT_LIMIT;
    let cursor: string | undefined;
    const listed: JobView[] = [];
    while (remaining > 0) {
      const page = await client.jobs({ status, limit: Math.min(remaining, PAGE_MAX), cursor });
      if (json) for (const job of page.jobs) out.write(`${jsonText(job)}\n`);
      listed.push(...page.jobs);
      remaining -= page.jobs.length;
      if (page.next_cursor === null || page.jobs.length === 0) break;
      cursor = page.next_cursor;
    }
    if (json) return EXIT.ok;
    // The whole list at once: the columns that fit the terminal are chosen for every row together.
    if (listed.length === 0) out.write(`no ${status ? `${status} ` : ""}jobs\n`);
    else out.write(jobTable(listed, out.columns).map((l) => `${l}\n`).join(""));
    return EXIT.ok;
  },
};
