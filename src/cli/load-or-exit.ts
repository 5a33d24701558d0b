import { loadConfig, type LoadedConfig } from "../config/load.ts";

export const EXIT_CONFIG = 78;

export async function loadConfigOrExit(path: string | undefined): Promise<LoadedConfig> {
  const result = await loadConfig({ path, env: process.env });
  if (result.ok) return result.value;
  process.stderr.write(`lora-worker: refusing to start, the configuration is invalid:\n${result.errors.map((e) => `  - ${e}\n`).join("")}`);
  process.exit(EXIT_CONFIG);
}
