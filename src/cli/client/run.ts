import { parseArgs, UsageError } from "../args.ts";
import { ADDRESS_HELP, ADDRESS_OPTIONS, resolveAddress } from "./address.ts";
import type { ClientCommand } from "./command.ts";
import { ClientError, EXIT, EXIT_CODES_HELP } from "./exit.ts";
import { processTerminal, type Terminal } from "./terminal.ts";
import { createWorkerClient } from "./worker-client.ts";

function clientHelp(synopsis: string, command: ClientCommand): string {
  const usage = `Usage: lora-worker ${synopsis} [--url URL] [--token TOKEN] [--config FILE]`;
  return `${usage}\n\n${command.help}\n\n${ADDRESS_HELP}\n${EXIT_CODES_HELP}`;
}

// The one place a client command's errors become exit codes and messages.
/** Runs client command `name` (`synopsis`: its form in the command table) on `argv`. */
export async function clientCommand(
  name: string, synopsis: string, command: ClientCommand, argv: string[], out: Terminal = processTerminal(),
): Promise<number> {
  try {
    const options = parseArgs(argv, {
      values: [...command.values, ...ADDRESS_OPTIONS],
      flags: [...command.flags, "help"],
      short: command.short,
    });
    if (options.flags.has("help")) {
      out.write(clientHelp(synopsis, command));
      return EXIT.ok;
    }
    const { url, token, config } = options.values;
    const address = await resolveAddress({ url, token, config }, process.env);
    return await command.run({ client: createWorkerClient(address), out, options });
  } catch (err) {
    if (err instanceof UsageError) {
      const usage = `usage: lora-worker ${synopsis}   (lora-worker ${name} --help for more)`;
      out.error(`lora-worker ${name}: ${err.message}\n${usage}\n`);
      return EXIT.usage;
    }
    if (!(err instanceof ClientError)) throw err;
    out.error(`lora-worker ${name}: ${err.message}\n`);
    return err.exitCode;
  }
}
