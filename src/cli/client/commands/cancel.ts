import { UsageError } from "../../args.ts";
import { jsonText, outcomeLines, resumeHint } from "../format.ts";
import type { ClientCommand } from "../command.ts";
import { resolveJobId } from "../job-id.ts";
import { EXIT } from "../exit.ts";

export const cancel: ClientCommand = {
  help: `Cancels job ID: the worker stops the trainer's whole process group and answers once nothing of it is
left (up to trainer.cancel_grace_seconds and a SIGKILL). On a job that already ended it changes nothing.
Prints how the job ended; --json: the final job record.
Exit: 0 once the worker answered (whatever the job's status).`,
  values: [],
  flags: ["json"],
  async run({ client, out, options }) {
    if (options.positional.length !== 1) throw new UsageError("cancel takes exactly one job ID");
    const view = await client.cancel(await resolveJobId(client, options.positional[0]!));
    if (options.flags.has("json")) out.write(`${jsonText(view)}\n`);
    else {
      const already = view.status === "cancelled" ? "" : "had already ended, ";
      // A cancel keeps the run's newest saved state: said, with the command that goes on from it.
      const kept = view.resumable ? [`its saved state at step ${view.resume_step} was kept`, resumeHint(view)!] : [];
      out.write(`job ${view.worker_job_id} ${already}${[...outcomeLines(view), ...kept].join("\n")}\n`);
    }
    return EXIT.ok;
  },
};
