import type { Config } from "../config/schema.ts";

// In simulate mode this very program stands in for accelerate; only the executable differs.
export function trainerCommand(config: Config): string[] {
  if (config.trainer.mode === "real") return [config.trainer.accelerate];
  const compiled = Bun.main.startsWith("/$bunfs/");
  return compiled ? [process.execPath] : [process.execPath, Bun.main];
}
