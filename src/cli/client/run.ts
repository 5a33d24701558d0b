import { parseArgs, UsageError } from "../args.ts";
import { ADDRESS_HELP, ADDRESS_OPTIONS, resolveAddress } from "./address.ts";
import type { ClientCommand } from "./command.ts";
import { cancel } from "./commands/cancel.ts";
import { gpu } from "./commands/gpu.ts";
import { jobs } from "./commands/jobs.ts";
import { logs } from "./commands/logs.ts";
import { pause } from "./commands/pause.ts";
import { resume } from "./commands/resume.ts";
import { smoke } from "./commands/smoke.ts";
import { status } from "./commands/status.ts";
import { submit } from "./commands/submit.ts";
import { ClientError, EXIT, EXIT_CODES_HELP } from "./exit.ts";
import { processTerminal, type Terminal } from "./terminal.ts";
import { createWorkerClient } from "./worker-client.ts";

const CLIENT_COMMANDS: Readonly<Record<string, ClientCommand>> = {
  submit,
  status,
  jobs,
  logs,
  cancel,
  pause,
  resume,
  smoke,
  gpu,
};

function clientHelp(command: ClientCommand): string {
  const usage = `Usage: lora-worker ${command.usage} [--url URL] [--token TOKEN] [--config FILE]`;
  return `${usage}\n\n${command.help}\n\n${ADDRESS_HELP}\n${EXIT_CODES_HELP}`;
}

// The one place a client command's errors become exit codes and messages.
export async function clientCommand(name: string, argv: string[], out: Terminal = processTerminal()): Promise<number> {
  const command = CLIENT_COMMANDS[name]!;
  try {
    const options = parseArgs(argv, {
      values: [...command.values, ...ADDRESS_OPTIONS],
      flags: [...command.flags, "help"],
      short: command.short,
    });
    if (options.flags.has("help")) {
      out.write(clientHelp(command));
      return EXIT.ok;
    }
    const { url, token, config } = options.values;
    const address = await resolveAddress({ url, token, config }, process.env);
    return await command.run({ client: createWorkerClient(address), out, options });
  } catch (err) {
    if (err instanceof UsageError) {
      const usage = `usage: lora-worker ${command.usage}   (lora-worker ${name} --help for more)`;
      out.error(`lora-worker ${name}: ${err.message}\n${usage}\n`);
      return EXIT.usage;
    }
    if (!(err instanceof ClientError)) throw err;
    out.error(`lora-worker ${name}: ${err.message}\n`);
    return err.exitCode;
  }
}
