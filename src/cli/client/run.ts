import { parseArgs, UsageError, type ParsedArgs } from "../args.ts";
import { resolveAddress } from "./address.ts";
import { cancel } from "./commands/cancel.ts";
import { gpu } from "./commands/gpu.ts";
import { jobs } from "./commands/jobs.ts";
import { logs } from "./commands/logs.ts";
import { pause } from "./commands/pause.ts";
import { resume } from "./commands/resume.ts";
import { status } from "./commands/status.ts";
import { submit } from "./commands/submit.ts";
import { processTerminal, type Terminal } from "./terminal.ts";
import { ClientError, createWorkerClient, EXIT, EXIT_CODES_HELP, type WorkerClient } from "./worker-client.ts";

export interface CommandContext {
  client: WorkerClient;
  out: Terminal;
  options: ParsedArgs;
}

/** One client command: its options, its help, and what it does once the worker's address is known. */
export interface ClientCommand {
  usage: string;
  /** What it prints and how it ends, for `--help`. */
  help: string;
  values: readonly string[];
  flags: readonly string[];
  short?: Readonly<Record<string, string>>;
  run(ctx: CommandContext): Promise<number>;
}

const CLIENT_COMMANDS: Readonly<Record<string, ClientCommand>> = { submit, status, jobs, logs, cancel, pause, resume, gpu };

const ADDRESS_OPTIONS = ["url", "token", "config"] as const;

const ADDRESS_HELP = `Which worker (each piece: a flag, else the environment, else the config, else the default):
  --url URL         the worker, e.g. http://127.0.0.1:8203          (env LORA_WORKER_URL)
  --token TOKEN     its bearer token                                (env LORA_WORKER_TOKEN)
  --config FILE     the worker's own config: the URL from listen (0.0.0.0 dialed as 127.0.0.1, [::] as [::1])
                    and the first token of its token source ($CREDENTIALS_DIRECTORY/token, else auth.token_file)
                    (env LORA_WORKER_CONFIG; without either, /etc/lora-worker/config.toml when readable, whose
                    token is sent only to the URL it names)
  default           http://127.0.0.1:8203 without a token
`;

function clientHelp(command: ClientCommand): string {
  return `Usage: lora-worker ${command.usage} [--url URL] [--token TOKEN] [--config FILE]\n\n${command.help}\n\n${ADDRESS_HELP}\n${EXIT_CODES_HELP}`;
}

// The one place a client command's errors become exit codes and messages.
export async function clientCommand(name: string, argv: string[], out: Terminal = processTerminal()): Promise<number> {
  const command = CLIENT_COMMANDS[name]!;
  try {
    const options = parseArgs(argv, { values: [...command.values, ...ADDRESS_OPTIONS], flags: [...command.flags, "help"], short: command.short });
    if (options.flags.has("help")) {
      out.write(clientHelp(command));
      return EXIT.ok;
    }
    const address = await resolveAddress({ url: options.values.url, token: options.values.token, config: options.values.config }, process.env);
    return await command.run({ client: createWorkerClient(address), out, options });
  } catch (err) {
    if (err instanceof UsageError) {
      out.error(`lora-worker ${name}: ${err.message}\nusage: lora-worker ${command.usage}   (lora-worker ${name} --help for more)\n`);
      return EXIT.usage;
    }
    if (!(err instanceof ClientError)) throw err;
    out.error(`lora-worker ${name}: ${err.message}\n`);
    return err.exitCode;
  }
}
