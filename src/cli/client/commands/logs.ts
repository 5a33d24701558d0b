import { positiveInt, UsageError } from "../../args.ts";
import { eventsOf } from "../sse.ts";
import { exitCodeOf } from "../format.ts";
import type { ClientCommand } from "../command.ts";
import type { Terminal } from "../terminal.ts";
import { resolveJobId } from "../job-id.ts";
import { ClientError, EXIT } from "../exit.ts";

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
    const id = await resolveJobId(client, options.positional[0]!);
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

// `logs -f` re-reads the log's tail (the route has no offsets) and shows only what is new. The last line
// shown is "open": it may be a tqdm bar that the next tail shows redrawn. On a terminal it is redrawn in
// place; into a pipe its new form is printed as one more line.
export class LogView {
  private shown: string[] = [];
  // On a terminal the open line has no newline yet.
  private lineOpen = false;

  constructor(
    private readonly out: Terminal,
    // Lines kept to align the next tail with: the length of the tails read.
    private readonly window: number,
  ) {}

  update(text: string): void {
    const tail = text === "" ? [] : text.replace(/\n$/, "").split("\n");
    if (this.shown.length === 0) return this.appendAll(tail);
    const at = this.openLineIndex(tail);
    if (at === null) {
      this.write(`… (the log grew by more than ${this.window} lines between two reads; lines were skipped)`);
      this.shown = [];
      return this.appendAll(tail);
    }
    if (tail[at] !== this.shown.at(-1)) this.replaceOpen(tail[at]!);
    this.appendAll(tail.slice(at + 1));
  }

  close(): void {
    if (this.lineOpen) this.out.write("\n");
    this.lineOpen = false;
  }

  // Where the open line stands in `tail`: the latest position whose preceding lines end like those shown;
  // without shown lines before it, the latest line equal to it. null: the tail does not reach back that far.
  private openLineIndex(tail: string[]): number | null {
    const committed = this.shown.slice(0, -1);
    for (let j = tail.length - 1; j > 0 && committed.length > 0; j--) {
      if (endsLike(tail, j, committed, Math.min(j, committed.length))) return j;
    }
    const same = tail.lastIndexOf(this.shown.at(-1)!);
    return same === -1 ? null : same;
  }

  private appendAll(lines: string[]): void {
    for (const line of lines) this.append(line);
    this.shown = this.shown.slice(-this.window);
  }

  private append(line: string): void {
    this.write(line);
    this.shown.push(line);
  }

  private write(line: string): void {
    if (!this.out.isTTY) return this.out.write(`${line}\n`);
    this.out.write(`${this.lineOpen ? "\n" : ""}${line}`);
    this.lineOpen = true;
  }

  private replaceOpen(line: string): void {
    if (this.out.isTTY) this.out.redraw(line);
    else this.out.write(`${line}\n`);
    this.shown[this.shown.length - 1] = line;
  }
}

// The `k` lines of `tail` before index `j` equal the last `k` lines of `committed`.
function endsLike(tail: string[], j: number, committed: string[], k: number): boolean {
  for (let n = 1; n <= k; n++) if (tail[j - n] !== committed[committed.length - n]) return false;
  return true;
}
