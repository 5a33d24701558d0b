import { positiveInt, UsageError } from "../../args.ts";
import { screenLine } from "../../../progress/progress.ts";
import { eventsOf } from "../sse.ts";
import { exitCodeOf } from "../format.ts";
import type { ClientCommand } from "../command.ts";
import type { Terminal } from "../terminal.ts";
import { resolveJobId } from "../job-id.ts";
import { ClientError, EXIT, type ExitCode } from "../exit.ts";
import type { LogAnswer, WorkerClient } from "../worker-client.ts";

const DEFAULT_LINES = 200; // the worker's own default for /log

export const logs: ClientCommand = {
  help: `Prints the last N lines of the job's trainer log (default ${DEFAULT_LINES}, at most 5000; a tqdm bar as its
last redraw). -f follows the log until the job ends: on each event of the job's event stream (and each heartbeat)
it reads what the log gained since the last read, from the cursor the worker hands out, so each line is printed
once. If the worker cut the log to its cap in between, a notice on stderr says so and the log goes on from what the
cut kept. A worker too old to hand out cursors is refused with a message. On a terminal the log's control
characters are shown as cat -v shows them (ESC as ^[); a pipe gets the log's bytes unchanged.
Exit: 0; with -f, by how the job ended: 0 succeeded, 1 failed, 3 cancelled, 7 paused.`,
  values: ["lines"],
  flags: ["follow"],
  short: { f: "follow" },
  async run({ client, out, options }) {
    if (options.positional.length !== 1) throw new UsageError("logs takes exactly one job ID");
    const id = await resolveJobId(client, options.positional[0]!);
    const lines = positiveInt(options, "lines");
    if (!options.flags.has("follow")) {
      out.write((await client.log(id, lines)).text);
      return EXIT.ok;
    }
    return follow(client, out, id, lines ?? DEFAULT_LINES);
  },
};

async function follow(client: WorkerClient, out: Terminal, id: string, lines: number): Promise<ExitCode> {
  const tail = await client.log(id, lines);
  let cursor = cursorOf(client, id, tail);
  const log = new LogStream(out);
  log.tail(tail.text);
  // True when the read brought anything.
  const readOn = async (): Promise<boolean> => {
    const answer = await client.logAfter(id, cursor);
    cursor = cursorOf(client, id, answer);
    if (answer.cut) log.notice(cutNotice(id));
    log.append(answer.text);
    return answer.text !== "";
  };
  for await (const event of eventsOf(client, id)) {
    if (event.kind !== "end") {
      await readOn();
      continue;
    }
    while (await readOn());
    log.close();
    return exitCodeOf(event.view);
  }
  throw new ClientError("unreachable", `the event stream of job ${id} ended without its final event`);
}

const cutNotice = (id: string) =>
  `lora-worker logs: the worker cut job ${id}'s log to its cap since the last read; going on from what the cut kept\n`;

// A worker that predates cursors answers the tail and ignores `after`; a run an older worker started keeps no record
// of its log's cuts. Neither can be followed without printing lines twice or missing some unsaid.
function cursorOf(client: WorkerClient, id: string, answer: LogAnswer): string {
  if (answer.cursor !== null) return answer.cursor;
  throw new ClientError(
    "refused",
    `the worker at ${client.url} hands out no cursor to follow job ${id}'s log by (a worker older than this client, ` +
      `a run an older worker started, or a cut of the log that never finished); lora-worker logs ${id} prints its tail`,
  );
}

// The log's bytes as they come, shown as a terminal shows them: of a line redrawn with "\r", its last drawing. The
// line still being written is "open": on a terminal it is drawn without its newline and redrawn in place; into a
// pipe each new form of it is one more line.
export class LogStream {
  private open = ""; // the open line as written so far
  private shown: string | null = null; // what is shown of it
  private live = false; // on a terminal, the cursor stands at the end of the shown open line

  constructor(private readonly out: Terminal) {}

  // The tail a follow starts from: its last line comes again from the cursor, so the bytes show it.
  tail(text: string): void {
    for (const line of text.split("\n").slice(0, -2)) this.out.write(`${line}\n`);
  }

  append(text: string): void {
    const lines = (this.open + text).split("\n");
    this.open = lines.pop()!;
    for (const line of lines) this.finish(screenLine(line));
    // A chunk may end right after a "\r": nothing shows until the redraw comes.
    const open = screenLine(this.open);
    if (open !== "") this.show(open);
  }

  // On stderr; a terminal ends the live line itself first.
  notice(text: string): void {
    this.out.error(text);
    this.live = false;
  }

  close(): void {
    if (this.live) this.out.write("\n");
    this.live = false;
  }

  // A line that got its newline: shown already, unless it changed since.
  private finish(line: string): void {
    if (this.live) {
      if (line !== this.shown) this.out.redraw(line);
      this.out.write("\n");
    } else if (line !== this.shown) {
      this.out.write(`${line}\n`);
    }
    this.shown = null;
    this.live = false;
  }

  private show(line: string): void {
    if (line === this.shown) return;
    if (this.live) this.out.redraw(line);
    else if (this.out.isTTY) this.out.write(line);
    else this.out.write(`${line}\n`);
    this.live = this.out.isTTY;
    this.shown = line;
  }
}
