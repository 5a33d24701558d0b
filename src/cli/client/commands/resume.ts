import { UsageError } from "../../args.ts";
import { followJob, followRenderer } from "../follow.ts";
import { exitCodeOf, jsonText } from "../format.ts";
import type { ClientCommand } from "../command.ts";
import { resolveJobId } from "../job-id.ts";
import { EXIT } from "../exit.ts";

export const resume: ClientCommand = {
  help: `Starts a new job that continues job ID, paused, failed or cancelled, from its newest saved state (a job a
resume already continued is refused, naming the job that did): the same request, dataset copy and output.
--samples N (0-4) changes only its preview images, e.g. 0 after a failure while sampling. Prints the new job's
id and the step it starts from (with --json, the worker's answer).
With --follow it then draws the new job until it ends, as submit --follow does.
Exit: 0 resumed (or, with --follow, succeeded), 1 failed, 3 cancelled, 7 paused; 5 with the worker's reasons when it
refuses (409 not_resumable and why, busy, VRAM, disk or output exists; 422; 503); 6 no such job.`,
  values: ["samples"],
  flags: ["json", "follow"],
  async run({ client, out, options }) {
    if (options.positional.length !== 1) throw new UsageError("resume takes exactly one job ID");
    const json = options.flags.has("json");
    const id = await resolveJobId(client, options.positional[0]!);
    const resumed = await client.resume(id, samplesOption(options.values.samples));
    const line = `job ${resumed.worker_job_id} resumed from ${resumed.resumed_from} at step ${resumed.resume_step}`;
    out.write(json ? `${jsonText(resumed)}\n` : `${line}\n`);
    if (!options.flags.has("follow")) return EXIT.ok;
    return exitCodeOf(await followJob(client, resumed.worker_job_id, followRenderer(out, json)));
  },
};

function samplesOption(raw: string | undefined): number | undefined {
  if (raw === undefined) return undefined;
  if (!/^[0-4]$/.test(raw)) throw new UsageError(`--samples must be 0 to 4 preview images, got ${JSON.stringify(raw)}`);
  return Number(raw);
}
