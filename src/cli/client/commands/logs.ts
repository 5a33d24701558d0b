import { positiveInt, UsageError } from "../../args.ts";
import { eventsOf } from "../follow.ts";
import { exitCodeOf } from "../format.ts";
import { LogView } from "../log-view.ts";
import type { ClientCommand } from "../run.ts";
import { ClientError, EXIT } from "../worker-client.ts";

const DEFAULT_LINES = 200; // the worker's own default for /log
const FOLLOW_WINDOW = 1000;

export const logs: ClientCommand = {
  usage: "logs ID [-f|--follow] [--lines N]",
  help: `Prints the last N lines of the job's trainer log (default ${DEFAULT_LINES}, at most 5000; a tqdm bar as its
last redraw). -f follows the log until the job ends: it re-reads the tail on each event of the job's event
stream (and each heartbeat), printing only what is new. On a terminal the log's control characters are shown
as cat -v shows them (ESC as ^[); a pipe gets the log's bytes unchanged.
Exit: 0; with -f, by how the job ended: 0 succeeded, 1 failed, 3 cancelled.`,
  values: ["lines"],
  flags: ["follow"],
  short: { f: "follow" },
  async run({ client, out, options }) {
    if (options.positional.length !== 1) throw new UsageError("logs takes exactly one job ID");
    const id = options.positional[0]!;
    const lines = positiveInt(options, "lines");
    if (!options.flags.has("follow")) {
      out.write(await client.log(id, lines));
      return EXIT.ok;
    }
    const view = new LogView(out, Math.max(lines ?? DEFAULT_LINES, FOLLOW_WINDOW));
    view.update(await client.log(id, lines ?? DEFAULT_LINES));
    for await (const event of eventsOf(client, id)) {
      view.update(await client.log(id, Math.max(lines ?? DEFAULT_LINES, FOLLOW_WINDOW)));
      if (event.kind === "end") {
        view.close();
        return exitCodeOf(event.view);
      }
    }
    throw new ClientError("unreachable", `the event stream of job ${id} ended without its final event`);
  },
};
