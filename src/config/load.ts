import { accessSync, constants, statSync } from "node:fs";
import { dirname, join } from "node:path";
import type { z } from "zod";
import { ConfigSchema, type Config } from "./schema.ts";
import { CONFIG_KEYS, ENV_PREFIX, getPath, setPath, type ConfigKey } from "./keys.ts";

export const DEFAULT_CONFIG_PATH = "/etc/lora-worker/config.toml";
export const CONFIG_PATH_ENV = `${ENV_PREFIX}CONFIG`;

export interface LoadedConfig {
  config: Config;
  file: string | null;
  defaultsInUse: string[];
  envOverrides: string[];
}

export type ConfigResult = { ok: true; value: LoadedConfig } | { ok: false; errors: string[] };

export interface ConfigSource {
  path: string | undefined;
  env: Record<string, string | undefined>;
}

// Reads the file and the environment, validates once, and names every bad key in one go.
export async function loadConfig(source: ConfigSource): Promise<ConfigResult> {
  const explicit = source.path ?? source.env[CONFIG_PATH_ENV];
  const file = explicit ?? DEFAULT_CONFIG_PATH;
  const raw = await readToml(file, explicit !== undefined);
  if (!raw.ok) return { ok: false, errors: [raw.error] };
  const env = applyEnv(raw.value, source.env);
  const parsed = ConfigSchema.safeParse(raw.value);
  const errors = [...env.errors, ...(parsed.success ? [] : describeIssues(parsed.error.issues))];
  if (!parsed.success) return { ok: false, errors };
  errors.push(...checkPaths(parsed.data));
  if (errors.length > 0) return { ok: false, errors };
  return {
    ok: true,
    value: {
      config: parsed.data,
      file: raw.found ? file : null,
      defaultsInUse: CONFIG_KEYS.filter((k) => getPath(raw.value, k.key) === undefined).map((k) => k.key),
      envOverrides: env.applied,
    },
  };
}

type TomlRead = { ok: true; found: boolean; value: Record<string, unknown> } | { ok: false; error: string };

async function readToml(path: string, required: boolean): Promise<TomlRead> {
  const file = Bun.file(path);
  if (!(await file.exists())) {
    if (required) return { ok: false, error: `config file ${path} does not exist` };
    return { ok: true, found: false, value: {} };
  }
  try {
    return { ok: true, found: true, value: Bun.TOML.parse(await file.text()) as Record<string, unknown> };
  } catch (err) {
    return { ok: false, error: `config file ${path} is not valid TOML: ${(err as Error).message}` };
  }
}

function applyEnv(target: Record<string, unknown>, env: Record<string, string | undefined>) {
  const errors: string[] = [];
  const applied: string[] = [];
  for (const [name, value] of Object.entries(env)) {
    if (!name.startsWith(ENV_PREFIX) || name === CONFIG_PATH_ENV || value === undefined) continue;
    const key = CONFIG_KEYS.find((k) => k.env === name);
    if (!key) {
      errors.push(`${name}: unknown environment override (known: ${knownEnvNames()})`);
      continue;
    }
    const converted = convertEnv(key, value);
    if (converted.ok) {
      setPath(target, key.key, converted.value);
      applied.push(key.key);
    } else errors.push(`${name}: ${converted.error}`);
  }
  return { errors, applied };
}

function convertEnv(key: ConfigKey, value: string): { ok: true; value: unknown } | { ok: false; error: string } {
  if (key.kind === "list") return { ok: true, value: value.split(":").filter((p) => p !== "") };
  if (key.kind !== "number") return { ok: true, value };
  const n = Number(value);
  if (value.trim() === "" || !Number.isFinite(n)) return { ok: false, error: `expected a number, got ${JSON.stringify(value)}` };
  return { ok: true, value: n };
}

function knownEnvNames(): string {
  return CONFIG_KEYS.flatMap((k) => (k.env ? [k.env] : [])).join(", ");
}

function describeIssues(issues: z.core.$ZodIssue[]): string[] {
  return issues.flatMap((issue) => {
    const where = issue.path.join(".");
    if (issue.code === "unrecognized_keys") {
      return issue.keys.map((k) => `${where ? `${where}.` : ""}${k}: unknown key`);
    }
    return [`${where || "(top level)"}: ${issue.message}`];
  });
}

function checkPaths(config: Config): string[] {
  const errors = [directoryError("handoff_root", config.handoff_root)];
  config.model_roots.forEach((root, i) => errors.push(directoryError(`model_roots[${i}]`, root)));
  errors.push(creatableError("state_dir", config.state_dir));
  if (config.trainer.mode === "real") {
    errors.push(executableError("trainer.accelerate", config.trainer.accelerate));
    errors.push(fileError("trainer.sd_scripts_dir", join(config.trainer.sd_scripts_dir, "sdxl_train_network.py")));
  }
  return errors.filter((e): e is string => e !== null);
}

function statOrNull(path: string) {
  try {
    return statSync(path);
  } catch {
    return null;
  }
}

function directoryError(key: string, path: string): string | null {
  const st = statOrNull(path);
  if (!st) return `${key}: directory ${path} does not exist`;
  return st.isDirectory() ? null : `${key}: ${path} is not a directory`;
}

function creatableError(key: string, path: string): string | null {
  const st = statOrNull(path);
  if (st) return st.isDirectory() ? null : `${key}: ${path} is not a directory`;
  return statOrNull(dirname(path))?.isDirectory() ? null : `${key}: neither ${path} nor its parent exists`;
}

function fileError(key: string, path: string): string | null {
  const st = statOrNull(path);
  if (!st) return `${key}: ${path} does not exist`;
  return st.isFile() ? null : `${key}: ${path} is not a regular file`;
}

function executableError(key: string, path: string): string | null {
  const missing = fileError(key, path);
  if (missing) return missing;
  try {
    accessSync(path, constants.X_OK);
    return null;
  } catch {
    return `${key}: ${path} is not executable`;
  }
}
