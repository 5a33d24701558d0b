import type { Config } from "../config/schema.ts";

// This program, whether compiled or run from source: it is the shim and the simulated trainer.
export function selfCommand(): string[] {
  const compiled = Bun.main.startsWith("/$bunfs/");
  return compiled ? [process.execPath] : [process.execPath, Bun.main];
}

// In simulate mode this very program stands in for accelerate; only the executable differs.
export function trainerCommand(config: Config): string[] {
  return config.trainer.mode === "real" ? [config.trainer.accelerate] : selfCommand();
}
