import type { Config } from "../config/schema.ts";
import type { ShimCommand } from "../supervisor/index.ts";
import { describeTrainer, type Trainer } from "../trainer/trainer.ts";

// This program, whether compiled or run from source: it is the shim and the simulated trainer.
function selfCommand(): string[] {
  const compiled = Bun.main.startsWith("/$bunfs/");
  return compiled ? [process.execPath] : [process.execPath, Bun.main];
}

// The shim runs with the worker's PATH (the environment is read here, by the command that starts).
export function shimCommand(): ShimCommand {
  return { command: selfCommand(), path: process.env.PATH ?? "/usr/bin:/bin" };
}

// The configured trainer: in simulate mode this very program stands in for accelerate.
export function chooseTrainer(config: Config): Trainer {
  return describeTrainer(config, selfCommand());
}
