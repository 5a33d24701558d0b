// The words the command table becomes: the overview (`lora-worker --help`), a host command's --help, and the
// usage line a usage error ends with.
import { BUILD } from "../version.ts";
import { COMMANDS, type Command } from "./commands.ts";

const WIDTH = 118;
const SUMMARY_COLUMN = 47;

/** `lora-worker NAME --help` for a host command: its usage lines, then its own help. */
export function commandHelp(command: Command): string {
  const lines = command.usage.map((form, i) => `${i === 0 ? "Usage:" : "      "} ${wrapped(`lora-worker ${form}`, 7)}`);
  return `${lines.join("\n")}\n\n${command.help ?? ""}`;
}

/** A command's forms on one line: `lora-worker tokenizers import … PATH | lora-worker tokenizers check …`. */
export const usageLine = (command: Command): string => command.usage.map((form) => `lora-worker ${form}`).join(" | ");


/** Whether a command's words ask for its help. */
export const asksForHelp = (words: readonly string[]) => words.includes("--help") || words.includes("-h");

// A synopsis longer than the width goes on under its command word, broken before an option.
function wrapped(synopsis: string, indent: number): string {
  const continued = " ".repeat(indent + synopsis.indexOf(" ", "lora-worker ".length) + 1);
  const lines = [""];
  for (const word of synopsis.split(/ (?=\[)/)) {
    const line = lines[lines.length - 1]!;
    if (line !== "" && indent + line.length + word.length + 1 > WIDTH) lines.push(`${continued}${word}`);
    else lines[lines.length - 1] = line === "" ? word : `${line} ${word}`;
  }
  return lines.join("\n");
}

// Each form a row: its synopsis, then its summary from the summary column (on the next line when it is wider).
function rows(command: Command): string {
  return command.usage.map((form, i) => {
    const synopsis = `  ${wrapped(`lora-worker ${form}`, 2)}`;
    const [first, ...more] = command.summary[i]!.split("\n");
    const pad = " ".repeat(SUMMARY_COLUMN);
    const fits = !synopsis.includes("\n") && synopsis.length < SUMMARY_COLUMN;
    const lead = fits ? synopsis.padEnd(SUMMARY_COLUMN) : `${synopsis}\n${pad}`;
    return [`${lead}${first}`, ...more.map((line) => `${pad}${line}`)].join("\n");
  }).join("\n");
}

/** `lora-worker --help`: every command of the table, host commands then those that talk to a worker. */
export function overview(): string {
  const all = Object.values(COMMANDS);
  const list = (client: boolean) => all.filter((c) => (c.client === true) === client).map(rows).join("\n");
  return `lora-worker ${BUILD.version} — SDXL LoRA training (sd-scripts) on demand

Usage:
${list(false)}
  lora-worker --version | --help

Each command's options and exit codes: lora-worker COMMAND --help.

Talking to a running worker (--url URL, --token TOKEN or --config FILE):
${list(true)}

Exit codes: 0 ok, 1 request refused (plan), a FAIL (doctor, trainer check), tokenizers not written or not usable,
or nothing bundled or installed (trainer), 2 usage error, 73 state dir in use or damaged, 78 invalid configuration.
Client commands: 0 succeeded or done, 1 job failed, 2 usage error, 3 job cancelled, 4 cannot reach the worker,
5 the worker refused the request, 6 no such job, 7 job paused.
`;
}
