import { UsageError } from "../../args.ts";
import { followJob, followRenderer } from "../follow.ts";
import { exitCodeOf, jsonText } from "../format.ts";
import type { ClientCommand } from "../command.ts";
import { EXIT } from "../exit.ts";

export const submit: ClientCommand = {
  help: `Sends REQUEST.json to POST /train. Without --follow it prints the job id (with --json, the worker's answer).
With --follow it then draws the job until it ends: a live progress bar on a terminal, one plain line per
change otherwise, one JSON job record per line with --json; Ctrl-C stops following, not the job.
--idempotency-key KEY: a retried submit with the same key answers the same job.
Exit: 0 submitted (or, with --follow, succeeded), 1 failed, 3 cancelled, 7 paused; 5 with the worker's reasons when it
refuses the request (422 invalid, 409 busy or output exists, 503 GPU probe failed).`,
  values: ["idempotency-key"],
  flags: ["follow", "json"],
  async run({ client, out, options }) {
    if (options.positional.length !== 1) throw new UsageError("submit takes exactly one REQUEST.json");
    const body = await readRequest(options.positional[0]!);
    const json = options.flags.has("json");
    const dispatched = await client.submit(body, options.values["idempotency-key"]);
    if (!options.flags.has("follow")) {
      out.write(`${json ? jsonText(dispatched) : dispatched.worker_job_id}\n`);
      return EXIT.ok;
    }
    if (!json) out.write(`job ${dispatched.worker_job_id} submitted\n`);
    return exitCodeOf(await followJob(client, dispatched.worker_job_id, followRenderer(out, json)));
  },
};

// The file goes to the worker as written (it judges duplicate keys and number spellings), once it is JSON at all.
async function readRequest(path: string): Promise<string> {
  const text = await Bun.file(path).text().catch((err: NodeJS.ErrnoException) => {
    throw new UsageError(`cannot read ${path} (${err.code ?? err.message})`);
  });
  try {
    JSON.parse(text);
  } catch (err) {
    throw new UsageError(`${path} is not valid JSON: ${(err as Error).message}`);
  }
  return text;
}
