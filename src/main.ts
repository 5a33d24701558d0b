#!/usr/bin/env bun
import { UsageError } from "./cli/args.ts";
import { COMMANDS, type Command } from "./cli/commands.ts";
import { asksForHelp, commandHelp, overview, usageLine } from "./cli/usage.ts";
import { printable } from "./printable.ts";
import { didYouMean } from "./suggest.ts";
import { BUILD } from "./version.ts";

const EXIT_USAGE = 2;

const commandNamed = (word: string | undefined): Command | undefined =>
  word !== undefined && Object.hasOwn(COMMANDS, word) ? COMMANDS[word] : undefined;

// Each command's `run` loads only its own modules: the shim and the simulator start without the HTTP stack.
async function main(argv: string[]): Promise<number | undefined> {
  const [word, ...rest] = argv;
  const command = commandNamed(word);
  if (command !== undefined) {
    // A client command prints its own help, with the address options.
    if (command.help !== undefined && asksForHelp(rest)) {
      process.stdout.write(commandHelp(command));
      return 0;
    }
    return command.run(rest, word!);
  }
  if (word === "--version") {
    process.stdout.write(`lora-worker ${BUILD.version} (commit ${BUILD.commit})\n`);
    return 0;
  }
  if (word === "--help" || word === "help") {
    process.stdout.write(overview());
    return 0;
  }
  if (word === undefined) throw new UsageError("no command given");
  throw new UsageError(`unknown command ${word}${didYouMean(word, [...Object.keys(COMMANDS), "help"])}`);
}

// A usage error of a command is its message, the command's usage line and where its help is; the whole help only
// when no command was named, and for an unknown one where the list is.
// Always shown escaped: a usage error quotes what was typed, and a control character in it is never meant.
function usageAnswer(word: string | undefined, message: string): string {
  return printable(usageText(word, message));
}

function usageText(word: string | undefined, message: string): string {
  const command = commandNamed(word);
  if (command !== undefined) {
    return `lora-worker ${word}: ${message}\nusage: ${usageLine(command)}   (lora-worker ${word} --help for more)\n`;
  }
  if (word === undefined) return `lora-worker: ${message}\n\n${overview()}`;
  return `lora-worker: ${message}\nlora-worker --help lists the commands\n`;
}

// A command ends by letting the process end: Bun writes what is still queued for a slow pipe first, where
// process.exit would cut it (at 64 KiB). Something a command left running must not hold it open for ever.
const LINGER_MS = 30_000;

function finish(code: number): void {
  process.exitCode = code;
  setTimeout(() => process.exit(code), LINGER_MS).unref();
}

try {
  const code = await main(process.argv.slice(2));
  if (code !== undefined) finish(code);
} catch (err) {
  if (!(err instanceof UsageError)) throw err;
  process.stderr.write(usageAnswer(process.argv[2], err.message));
  finish(EXIT_USAGE);
}
