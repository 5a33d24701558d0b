import { TIERS } from "../../../tiers.ts";
import { UsageError } from "../../args.ts";
import { exitCodeOf, jsonText, outcomeLines, resumeHint } from "../format.ts";
import type { ClientCommand } from "../command.ts";
import { resolveJobId } from "../job-id.ts";
import { EXIT } from "../exit.ts";
import type { JobView } from "../worker-client.ts";

const [fast, balanced, quality] = [TIERS.fast, TIERS.balanced, TIERS.quality].map((t) => t.checkpointEvery);

export const pause: ClientCommand = {
  help: `Pauses job ID: the worker lets the run go on to its next saved state (a fast run saves one every ${fast} steps,
balanced every ${balanced}, quality every ${quality}), stops it right after, and answers then: this can wait that long.
The job ends cancelled and paused; lora-worker resume ID continues it from that state as a new job. A run
that ends before its next state ends as it would have; a job that already ended is left as it is.
Prints how the job ended; --json: the final job record.
Exit: 0 paused (the pause did what was asked: 7 is what status and --follow say of a paused job); otherwise by
how the job ended: 0 succeeded, 1 failed, 3 cancelled (a job paused before and resumed since included).`,
  values: [],
  flags: ["json"],
  async run({ client, out, options }) {
    if (options.positional.length !== 1) throw new UsageError("pause takes exactly one job ID");
    const view = await client.pause(await resolveJobId(client, options.positional[0]!));
    out.write(options.flags.has("json") ? `${jsonText(view)}\n` : pauseLines(view).map((l) => `${l}\n`).join(""));
    return view.paused ? EXIT.ok : exitCodeOf(view);
  },
};

function pauseLines(view: JobView): string[] {
  const id = view.worker_job_id;
  if (view.paused) {
    const then = view.resumable ? ` (resumable: lora-worker resume ${id})` : "";
    return [`job ${id} paused at step ${view.resume_step ?? view.step}${then}`];
  }
  // A pause the run recorded but did not reach: it ended another way before its next saved state.
  const how = view.pause_requested_at && !view.resumed_by ? "ended before its next saved state" : "had already ended";
  const [first = "", ...rest] = outcomeLines(view);
  const hint = resumeHint(view);
  return [`job ${id} ${how}, ${first}`, ...rest, ...(hint === null ? [] : [hint])];
}
