import { writeSync } from "node:fs";
import { UsageError } from "../args.ts";
import { resolveAddress } from "./address.ts";
import { ClientError } from "./client-error.ts";
import type { ClientCommand } from "./command.ts";
import { cancel } from "./commands/cancel.ts";
import { gpu } from "./commands/gpu.ts";
import { jobs } from "./commands/jobs.ts";
import { logs } from "./commands/logs.ts";
import { status } from "./commands/status.ts";
import { submit } from "./commands/submit.ts";
import { EXIT, EXIT_CODES_HELP } from "./exit-codes.ts";
import { parseOptions } from "./options.ts";
import { createTerminal, DEFAULT_COLUMNS, type Terminal } from "./terminal.ts";
import { createWorkerClient } from "./worker-client.ts";

const CLIENT_COMMANDS: Readonly<Record<string, ClientCommand>> = { submit, status, jobs, logs, cancel, gpu };

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
    const options = parseOptions(argv, { values: [...command.values, ...ADDRESS_OPTIONS], flags: [...command.flags, "help"], short: command.short });
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

function processTerminal(): Terminal {
  return createTerminal(
    { stdout: (text) => writeAll(STDOUT, text), stderr: (text) => writeAll(STDERR, text) },
    { stdoutIsTTY: process.stdout.isTTY === true, stderrIsTTY: process.stderr.isTTY === true, columns: process.stdout.columns || DEFAULT_COLUMNS },
  );
}

const STDOUT = 1;
const STDERR = 2;

// Synchronous on purpose: the entry point ends with process.exit, which drops output still queued for a pipe.
// A reader that went away (`lora-worker jobs | head -1`) is not an error.
function writeAll(fd: number, text: string): void {
  const bytes = Buffer.from(text);
  for (let done = 0; done < bytes.length; ) {
    try {
      done += writeSync(fd, bytes, done);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === "EPIPE") return;
      if (code !== "EAGAIN") throw err;
      Bun.sleepSync(1); // a non-blocking pipe is full; the reader will drain it
    }
  }
}
