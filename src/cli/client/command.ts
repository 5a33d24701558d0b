import type { ParsedArgs } from "../args.ts";
import type { Terminal } from "./terminal.ts";
import type { WorkerClient } from "./worker-client.ts";

interface CommandContext {
  client: WorkerClient;
  out: Terminal;
  options: ParsedArgs;
}

// One client command (its usage is the command table's): its options, its help, and what it does once the
// worker's address is known.
export interface ClientCommand {
  /** What it prints and how it ends, for `--help`. */
  help: string;
  values: readonly string[];
  flags: readonly string[];
  short?: Readonly<Record<string, string>>;
  run(ctx: CommandContext): Promise<number>;
}
