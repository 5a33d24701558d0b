import { constants } from "node:fs";
import { dirname, join } from "node:path";
import type { z } from "zod";
import { TIER_NAMES, TIERS } from "../tiers.ts";
import { mayAccess, statOrNull } from "../fs.ts";
import { fail, ok, type Result } from "../result.ts";
import { closest, didYouMean } from "../suggest.ts";
import { CONFIG_KEYS, type ConfigKey, ENV_PREFIX } from "./keys.ts";
import { ConfigSchema, DEFAULTS, TRAIN_SCRIPT, type Config } from "./schema.ts";
import { readToml } from "./toml.ts";

export const DEFAULT_CONFIG_PATH = "/etc/lora-worker/config.toml";
export const CONFIG_PATH_ENV = `${ENV_PREFIX}CONFIG`;
// Read by the operator CLI (which worker to talk to), not configuration of this worker.
export const CLIENT_ENV = [`${ENV_PREFIX}URL`, `${ENV_PREFIX}TOKEN`];

export interface LoadedConfig {
  config: Config;
  file: string | null;
  defaultsInUse: string[];
  envOverrides: string[];
}

type ConfigResult = Result<LoadedConfig, string[]>;

export interface ConfigSource {
  path: string | undefined;
  env: Record<string, string | undefined>;
  /** Whether the roots, the state dir and the trainer's paths must exist here: not for a client, which reads only
   * where the worker listens and its token. */
  hostPaths?: boolean;
}

/** The file a source names: --config, else $LORA_WORKER_CONFIG, else the default (which may be absent). */
export function configFileOf(source: Pick<ConfigSource, "path" | "env">): { file: string; explicit: boolean } {
  const explicit = source.path ?? source.env[CONFIG_PATH_ENV];
  return { file: explicit ?? DEFAULT_CONFIG_PATH, explicit: explicit !== undefined };
}

// Reads the file and the environment, validates once, and names every bad key in one go.
export async function loadConfig(source: ConfigSource): Promise<ConfigResult> {
  const { file, explicit } = configFileOf(source);
  const raw = readToml(file, explicit);
  if (!raw.ok) return fail([raw.error]);
  const toml = raw.value.table;
  const env = applyEnv(toml, source.env);
  const parsed = ConfigSchema.safeParse(toml);
  const issues = parsed.success ? [] : parsed.error.issues;
  const errors = [
    ...env.errors,
    ...describeIssues(issues),
    ...(source.hostPaths === false ? [] : checkPaths(pathsToCheck(toml, issues))),
    ...(parsed.success ? checkVramNeeds(parsed.data) : []),
  ];
  if (!parsed.success || errors.length > 0) return fail(errors);
  return ok({
    config: parsed.data,
    file: raw.value.found ? file : null,
    defaultsInUse: CONFIG_KEYS.filter((k) => getPath(toml, k.key) === undefined).map((k) => k.key),
    envOverrides: env.applied,
  });
}

function applyEnv(target: Record<string, unknown>, env: Record<string, string | undefined>) {
  const errors: string[] = [];
  const applied: string[] = [];
  for (const [name, value] of Object.entries(env)) {
    const notConfig = name === CONFIG_PATH_ENV || CLIENT_ENV.includes(name);
    if (!name.startsWith(ENV_PREFIX) || notConfig || value === undefined) continue;
    const key = CONFIG_KEYS.find((k) => k.env === name);
    if (!key) {
      const known = CONFIG_KEYS.flatMap((k) => (k.env ? [k.env] : []));
      errors.push(`${name}: unknown environment override${didYouMean(name, known)} (known: ${knownEnvNames()})`);
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

function convertEnv(key: ConfigKey, value: string): Result<unknown> {
  if (key.kind === "list") return ok(value.split(":").filter((p) => p !== ""));
  if (key.kind === "boolean") {
    if (value === "true" || value === "false") return ok(value === "true");
    return fail(`expected true or false, got ${JSON.stringify(value)}`);
  }
  if (key.kind !== "number") return ok(value);
  const n = Number(value);
  if (value.trim() === "" || !Number.isFinite(n)) return fail(`expected a number, got ${JSON.stringify(value)}`);
  return ok(n);
}

function knownEnvNames(): string {
  return CONFIG_KEYS.flatMap((k) => (k.env ? [k.env] : [])).join(", ");
}

function describeIssues(issues: z.core.$ZodIssue[]): string[] {
  return issues.flatMap((issue) => {
    const where = issue.path.join(".");
    if (issue.code === "unrecognized_keys") {
      return issue.keys.map((k) => `${where ? `${where}.` : ""}${k}: unknown key${keyGuess(issue.path, k)}`);
    }
    return [`${where || "(top level)"}: ${issue.message}`];
  });
}

// The key a mistyped one meant: a sibling spelled nearly so, or a key of that very name one table away
// (`token_file` at the top for `auth.token_file`).
function keyGuess(path: readonly PropertyKey[], key: string): string {
  const table = path.filter((p) => typeof p === "string").join(".");
  const siblings = CONFIG_KEYS.map((k) => k.key).filter((k) => (table ? k.startsWith(`${table}.`) : true))
    .map((k) => k.slice(table ? table.length + 1 : 0).split(".")[0]!);
  const near = closest(key, new Set(siblings));
  if (near !== null) return ` (did you mean ${table ? `${table}.` : ""}${near}?)`;
  const elsewhere = CONFIG_KEYS.find((k) => k.key.split(".").at(-1) === key);
  return elsewhere === undefined ? "" : ` (did you mean ${elsewhere.key}?)`;
}

// Admission needs a number for every tier on every configured device class the tier may use.
function checkVramNeeds(config: Config): string[] {
  return TIER_NAMES.flatMap((tier) =>
    [...new Set(config.devices.map((d) => d.class))]
      .filter((cls) => TIERS[tier].deviceClasses.includes(cls) && config.gpu.vram_need_mib[tier][cls] === undefined)
      .map((cls) => `gpu.vram_need_mib.${tier}: no need given for device class "${cls}", which tier "${tier}" may use`),
  );
}

interface PathView {
  handoff_root?: string;
  model_roots: string[];
  state_dir?: string;
  real: boolean;
  accelerate?: string;
  sd_scripts_dir?: string;
}

// Paths are checked even when other keys are wrong, so one refusal names every bad key.
function pathsToCheck(raw: Record<string, unknown>, issues: z.core.$ZodIssue[]): PathView {
  const bad = new Set(issues.map((i) => String(i.path[0]) + (i.path[1] === undefined ? "" : `.${String(i.path[1])}`)));
  const pick = (key: string, fallback: string): string | undefined => {
    if (bad.has(key) || bad.has(key.split(".")[0]!)) return undefined;
    const value = getPath(raw, key);
    return typeof value === "string" ? value : value === undefined ? fallback : undefined;
  };
  const roots = getPath(raw, "model_roots");
  const stringRoots = Array.isArray(roots) ? roots.filter((r): r is string => typeof r === "string") : null;
  return {
    handoff_root: pick("handoff_root", DEFAULTS.handoff_root),
    state_dir: pick("state_dir", DEFAULTS.state_dir),
    model_roots: bad.has("model_roots") ? [] : (stringRoots ?? [...DEFAULTS.model_roots]),
    real: pick("trainer.mode", "real") === "real",
    accelerate: pick("trainer.accelerate", DEFAULTS.accelerate),
    sd_scripts_dir: pick("trainer.sd_scripts_dir", DEFAULTS.sd_scripts_dir),
  };
}

function checkPaths(view: PathView): string[] {
  const errors = [view.handoff_root === undefined ? null : directoryError("handoff_root", view.handoff_root)];
  view.model_roots.forEach((root, i) => errors.push(directoryError(`model_roots[${i}]`, root)));
  if (view.state_dir !== undefined) errors.push(creatableError("state_dir", view.state_dir));
  if (view.real && view.accelerate !== undefined) errors.push(executableError("trainer.accelerate", view.accelerate));
  if (view.real && view.sd_scripts_dir !== undefined) {
    errors.push(fileError("trainer.sd_scripts_dir", join(view.sd_scripts_dir, TRAIN_SCRIPT)));
  }
  return errors.filter((e): e is string => e !== null);
}

function directoryError(key: string, path: string): string | null {
  const st = statOrNull(path);
  if (!st) return `${key}: directory ${path} does not exist`;
  return st.isDirectory() ? null : `${key}: ${path} is not a directory`;
}

/** Why `path` (the value of `key`) cannot be a folder here: there as something else, or neither it nor its parent. */
export function creatableError(key: string, path: string): string | null {
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
  return mayAccess(path, constants.X_OK) ? null : `${key}: ${path} is not executable`;
}

function getPath(obj: Record<string, unknown>, key: string): unknown {
  let cur: unknown = obj;
  for (const part of key.split(".")) {
    if (typeof cur !== "object" || cur === null || !Object.hasOwn(cur, part)) return undefined;
    cur = (cur as Record<string, unknown>)[part];
  }
  return cur;
}

function setPath(obj: Record<string, unknown>, key: string, value: unknown): void {
  const parts = key.split(".");
  let cur = obj;
  for (const part of parts.slice(0, -1)) {
    const next = Object.hasOwn(cur, part) ? cur[part] : undefined;
    if (typeof next !== "object" || next === null) cur[part] = {};
    cur = cur[part] as Record<string, unknown>;
  }
  cur[parts.at(-1)!] = value;
}
