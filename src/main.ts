#!/usr/bin/env bun
import { UsageError } from "./cli/args.ts";
import { asksForHelp, COMMAND_USAGE, usageLine } from "./cli/usage.ts";
import { printable } from "./printable.ts";
import { didYouMean } from "./suggest.ts";
import { BUILD } from "./version.ts";

const EXIT_USAGE = 2;

const HELP = `lora-worker ${BUILD.version} — SDXL LoRA training (sd-scripts) on demand

Usage:
  lora-worker serve [--config FILE]            run the HTTP worker (default config /etc/lora-worker/config.toml)
  lora-worker plan [--config FILE] REQUEST.json
                                               print the exact process a request would start, spawn nothing
  lora-worker launch ...                       the simulated trainer (what simulate mode runs instead of accelerate)
  lora-worker doctor [--config FILE] [--user NAME] [--group NAME] [--unit FILE] [--dev-dir DIR]
                                               check this host as an operator would; one OK/WARN/FAIL line per check
                                               (as --user, else the unit's User=, else the user running it)
  lora-worker tokenizers write [--config FILE] write the two CLIP tokenizers the trainer loads offline into
                                               trainer.tokenizer_dir, from what this binary carries (no download)
  lora-worker tokenizers import [--config FILE] PATH
                                               copy them there from a Hugging Face cache or cache-dir folders
  lora-worker tokenizers check [--config FILE] whether trainer.tokenizer_dir holds both, usable
  lora-worker trainer bundle --sd-scripts DIR --out FILE [--python PY] [--python-version X.Y] [--platform TAG]
                                               on a machine with PyPI: sd-scripts, the Python lock and its wheels
                                               in one archive, for a box without internet
  lora-worker trainer install FILE [--venv DIR] [--python PY]
                                               a new venv from that archive, offline; prints the config's lines
  lora-worker trainer check [--config FILE]    whether the configured trainer environment runs the worker's jobs
  lora-worker config template                  every config key, commented out at its default, under its meaning
  lora-worker openapi                          the OpenAPI document the worker serves, with no server or token
  lora-worker shim JOB_DIR                     internal: the per-job shim that starts the trainer and records its exit
  lora-worker --version | --help

Each command's options and exit codes: lora-worker COMMAND --help.

Talking to a running worker (--url URL, --token TOKEN or --config FILE):
  lora-worker submit REQUEST.json [--follow] [--json] [--idempotency-key KEY]
                                               dispatch a train; --follow draws it until it ends
  lora-worker status [ID] [--json] [--follow]  one job, or the active one; --follow draws it live until it ends
  lora-worker jobs [--status S] [--limit N] [--json]
                                               recent jobs, one line each, newest first
  lora-worker logs ID [-f|--follow] [--lines N]
                                               the trainer log's tail; -f follows it until the job ends
  lora-worker cancel ID [--json]               stop a job's whole process tree
  lora-worker pause ID [--json]                stop a job right after its next saved state, to resume it later
  lora-worker resume ID [--samples N] [--json] [--follow]
                                               a new job continuing a paused, failed or cancelled one from its newest
                                               saved state
  lora-worker gpu [--json]                     GPUs with VRAM bars, co-tenants marked
  lora-worker smoke [--device N]               prove this deployment trains: a short real run paused, resumed,
                                               finished and checked, one line per stage

Exit codes: 0 ok, 1 request refused (plan), a FAIL (doctor, trainer check), tokenizers not written or not usable,
or nothing bundled or installed (trainer), 2 usage error, 73 state dir in use or damaged, 78 invalid configuration.
Client commands: 0 succeeded or done, 1 job failed, 2 usage error, 3 job cancelled, 4 cannot reach the worker,
5 the worker refused the request, 6 no such job, 7 job paused.
`;

// Every command word, for "did you mean" (the client commands, which main hands on, among them).
const COMMANDS = [
  "serve", "plan", "launch", "doctor", "tokenizers", "config", "shim", "submit", "status", "jobs", "logs", "cancel",
  "pause", "resume", "smoke", "gpu", "help",
];

// Commands load only their own modules: the shim and the simulator start without the HTTP stack.
async function main(argv: string[]): Promise<number | undefined> {
  const [command, ...rest] = argv;
  const usage = command === undefined ? undefined : COMMAND_USAGE[command];
  if (usage !== undefined && asksForHelp(rest)) {
    process.stdout.write(usage);
    return 0;
  }
  switch (command) {
    case "serve":
      await (await import("./cli/serve.ts")).serveCommand(rest);
      return undefined;
    case "plan":
      return (await import("./cli/plan.ts")).planCommand(rest);
    case "launch":
      // The simulator and the shim end at once: what they print goes to the run's log, never to a slow reader.
      process.exit(await (await import("./simulator/simulate.ts")).runSimulatedLaunch(rest, process.env));
    case "doctor":
      return (await import("./cli/doctor.ts")).doctorCommand(rest);
    case "tokenizers":
      return (await import("./cli/tokenizers.ts")).tokenizersCommand(rest);
    case "config":
      return (await import("./cli/config.ts")).configCommand(rest);
    case "openapi":
      return (await import("./cli/openapi.ts")).openapiCommand(rest);
    case "trainer":
      return (await import("./cli/trainer.ts")).trainerCommand(rest);
    case "submit":
    case "status":
    case "jobs":
    case "logs":
    case "cancel":
    case "pause":
    case "resume":
    case "smoke":
    case "gpu":
      return (await import("./cli/client/run.ts")).clientCommand(command, rest);
    case "shim":
      if (rest.length !== 1) throw new UsageError("shim takes exactly one job directory");
      process.exit(await (await import("./shim/shim.ts")).runShim(rest[0]!));
    case "--version":
      process.stdout.write(`lora-worker ${BUILD.version} (commit ${BUILD.commit})\n`);
      return 0;
    case "--help":
    case "help":
      process.stdout.write(HELP);
      return 0;
    default:
      throw new UsageError(command ? `unknown command ${command}${didYouMean(command, COMMANDS)}` : "no command given");
  }
}

// A usage error of a command is its message, the command's usage line and where its help is; the whole help only
// when no command was named, and for an unknown one where the list is.
// Always shown escaped: a usage error quotes what was typed, and a control character in it is never meant.
function usageAnswer(command: string | undefined, message: string): string {
  return printable(usageText(command, message));
}

function usageText(command: string | undefined, message: string): string {
  const usage = command === undefined ? undefined : COMMAND_USAGE[command];
  if (usage !== undefined) {
    const hint = `(lora-worker ${command} --help for more)`;
    return `lora-worker ${command}: ${message}\nusage: ${usageLine(usage)}   ${hint}\n`;
  }
  if (command === undefined) return `lora-worker: ${message}\n\n${HELP}`;
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
