import { UsageError } from "../../args.ts";
import { followJob, followRenderer } from "../follow.ts";
import { exitCodeOf, jsonText, statusLines } from "../format.ts";
import type { ClientCommand } from "../command.ts";
import { resolveJobId } from "../job-id.ts";
import { EXIT } from "../exit.ts";
import { isTerminal } from "../worker-client.ts";

export const status: ClientCommand = {
  help: `Shows job ID, or without ID the active job (or says that none is active; with --json, prints null):
one snapshot, as labelled lines (with the URL of each preview sample, which needs the same token) or the
record with --json. --follow draws an active job live until it ends (plain lines when not a terminal, one
JSON record per line with --json).
Exit: by the job's status: 0 succeeded, still running, or no active job; 1 failed; 3 cancelled; 7 paused.`,
  values: [],
  flags: ["json", "follow"],
  async run({ client, out, options }) {
    if (options.positional.length > 1) throw new UsageError("status takes at most one job ID");
    const json = options.flags.has("json");
    const named = options.positional[0];
    const id = named === undefined ? (await client.health()).active_job_id : await resolveJobId(client, named);
    if (!id) {
      out.write(json ? "null\n" : "no job is active\n");
      return EXIT.ok;
    }
    const view = await client.job(id);
    if (isTerminal(view.status) || !options.flags.has("follow")) {
      out.write(json ? `${jsonText(view)}\n` : statusLines(view, client.url).map((l) => `${l}\n`).join(""));
      // A person at a terminal is told how to watch it; a script gets the snapshot alone.
      if (!isTerminal(view.status) && !json && out.isTTY) out.write(`follow with: lora-worker status ${id} --follow\n`);
      return exitCodeOf(view);
    }
    if (!json) out.write(statusLines(view, client.url).slice(0, 2).map((l) => `${l}\n`).join(""));
    return exitCodeOf(await followJob(client, id, followRenderer(out, json)));
  },
};
