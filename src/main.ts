#!/usr/bin/env bun
import { UsageError } from "./cli/args.ts";
import { planCommand } from "./cli/plan.ts";
import { serveCommand } from "./cli/serve.ts";
import { runSimulatedLaunch } from "./simulator/simulate.ts";
import { BUILD } from "./version.ts";

const EXIT_USAGE = 2;

const HELP = `lora-worker ${BUILD.version} — SDXL LoRA training (sd-scripts) on demand

Usage:
  lora-worker serve [--config FILE]            run the HTTP worker (default config /etc/lora-worker/config.toml)
  lora-worker plan [--config FILE] REQUEST.json
                                               print the exact process a request would start, spawn nothing
  lora-worker launch ...                       the simulated trainer (what simulate mode runs instead of accelerate)
  lora-worker --version | --help

Exit codes: 0 ok, 1 request refused (plan), 2 usage error, 78 invalid configuration.
`;

async function main(argv: string[]): Promise<number | undefined> {
  const [command, ...rest] = argv;
  switch (command) {
    case "serve":
      await serveCommand(rest);
      return undefined;
    case "plan":
      return planCommand(rest);
    case "launch":
      return runSimulatedLaunch(rest, process.env);
    case "--version":
      process.stdout.write(`lora-worker ${BUILD.version} (commit ${BUILD.commit})\n`);
      return 0;
    case "--help":
    case "help":
      process.stdout.write(HELP);
      return 0;
    default:
      throw new UsageError(command ? `unknown command ${command}` : "no command given");
  }
}

try {
  const code = await main(process.argv.slice(2));
  if (code !== undefined) process.exit(code);
} catch (err) {
  if (!(err instanceof UsageError)) throw err;
  process.stderr.write(`lora-worker: ${err.message}\n\n${HELP}`);
  process.exit(EXIT_USAGE);
}
