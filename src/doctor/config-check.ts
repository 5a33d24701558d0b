import { CONFIG_PATH_ENV, DEFAULT_CONFIG_PATH, loadConfig, type ConfigSource } from "../config/load.ts";
import { ConfigSchema, type Config } from "../config/schema.ts";
import { fail, ok, type CheckResult } from "./check-result.ts";

export interface DoctorConfig {
  result: CheckResult;
  /** What the other checks look at; null when the file does not even parse against the schema. */
  config: Config | null;
}

/** Loads the config as `serve` does; when serve would refuse it, the other checks still run on what parses. */
export async function loadDoctorConfig(source: ConfigSource): Promise<DoctorConfig> {
  const loaded = await loadConfig(source);
  const explicit = source.path ?? source.env[CONFIG_PATH_ENV];
  const file = explicit ?? DEFAULT_CONFIG_PATH;
  if (loaded.ok) {
    const { config, defaultsInUse } = loaded.value;
    const where = loaded.value.file ? `${file} parses` : `no file at ${file}, every key at its default`;
    return { result: ok("config", `${where} (trainer mode ${config.trainer.mode}, ${defaultsInUse.length} keys at their default)`), config };
  }
  return {
    result: fail("config", `serve refuses to start: ${loaded.errors.join("; ")}`, `edit ${file} (every key is in the README's "Configuration")`),
    config: await schemaOnly(file, explicit !== undefined),
  };
}

// Only the file against the schema (no environment overrides, no path checks): enough to run the other checks.
// A file named on purpose and missing leaves nothing to check; a missing default file means all defaults, as in serve.
async function schemaOnly(file: string, explicit: boolean): Promise<Config | null> {
  try {
    const handle = Bun.file(file);
    const found = await handle.exists();
    if (!found && explicit) return null;
    const raw = found ? Bun.TOML.parse(await handle.text()) : {};
    const parsed = ConfigSchema.safeParse(raw);
    return parsed.success ? parsed.data : null;
  } catch {
    return null;
  }
}
