import { CONFIG_PATH_ENV, DEFAULT_CONFIG_PATH, loadConfig, type ConfigSource } from "../config/load.ts";
import { ConfigSchema, type Config } from "../config/schema.ts";
import type { RunAs, ServiceAccount } from "./service-account.ts";

/** How an operator brings the trainer's environment onto an offline box (docs/operating.md). */
export const INSTALL_TRAINER = "lora-worker trainer install FILE (a bundle made by lora-worker trainer bundle on a " +
  "machine with PyPI), then set trainer.accelerate and trainer.sd_scripts_dir to the two lines it prints";

type CheckStatus = "OK" | "WARN" | "FAIL";

/** One line of `lora-worker doctor`: what was checked, what was found, and for WARN/FAIL what to do. */
export interface DoctorCheck {
  status: CheckStatus;
  name: string;
  detail: string;
  fix?: string;
}

export const passed = (name: string, detail: string): DoctorCheck => ({ status: "OK", name, detail });

export const warned = (name: string, detail: string, fix?: string): DoctorCheck =>
  ({ status: "WARN", name, detail, ...(fix ? { fix } : {}) });

export const failed = (name: string, detail: string, fix: string): DoctorCheck =>
  ({ status: "FAIL", name, detail, fix });

// Several problems found by one check become one FAIL line; none is an OK line.
export function fromProblems(name: string, problems: string[], fixes: string[], okDetail: string): DoctorCheck {
  if (problems.length === 0) return passed(name, okDetail);
  return failed(name, problems.join("; "), fixes.join("; "));
}

export function formatCheck(check: DoctorCheck): string {
  const fix = check.fix ? ` — fix: ${check.fix}` : "";
  return `${check.status.padEnd(4)} ${check.name}: ${check.detail}${fix}`;
}

export function formatSummary(checks: DoctorCheck[], command = "doctor"): string {
  const count = (status: DoctorCheck["status"]) => checks.filter((c) => c.status === status).length;
  return `${command}: ${count("FAIL")} FAIL, ${count("WARN")} WARN, ${count("OK")} OK`;
}

export const hasFailure = (checks: DoctorCheck[]): boolean => checks.some((c) => c.status === "FAIL");

/** A FAIL that only real training or its deployment would meet: as it is, or for the simulator a WARN that says
 * why it does not matter to it. */
export type Relax = (check: DoctorCheck, why: string) => DoctorCheck;

/** What any check may ask of the trainer doctor chose once from trainer.mode (trainer-doctor.ts). */
export interface TrainerRules {
  relax: Relax;
  /** Whether the worker may run as whoever starts it (the simulator's, which no service shares a folder with). */
  anyAccount: boolean;
}

export interface DoctorDeps {
  config: Config;
  /** The trainer's rules, chosen once by the command. */
  trainer: TrainerRules;
  account: ServiceAccount;
  runAs: RunAs;
  /** Where the NVIDIA device nodes live: /dev on a host, a scratch directory in tests. */
  devDir: string;
  /** How long the trainer's interpreter may take to answer (trainer-checks.ts); its default is a minute. */
  pythonDeadlineMs?: number;
}

interface DoctorConfig {
  result: DoctorCheck;
  // What the other checks look at; null when the file does not even parse against the schema.
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
    const detail = `${where} (trainer mode ${config.trainer.mode}, ${defaultsInUse.length} keys at their default)`;
    return { result: passed("config", detail), config };
  }
  return {
    result: failed("config", `serve refuses to start: ${loaded.error.join("; ")}`, configFixes(loaded.error, file)),
    config: await schemaOnly(file, explicit !== undefined),
  };
}

// What a fresh install lacks has a command that brings it; anything else is an edit of the file.
function configFixes(errors: string[], file: string): string {
  const fixes = errors.map((error) => {
    if (/^trainer\.(accelerate|sd_scripts_dir):/.test(error)) return INSTALL_TRAINER;
    const root = /^model_roots\[\d+\]: directory (.+) does not exist$/.exec(error)?.[1];
    if (root !== undefined) return `install -d -m 0755 ${root} (install.sh makes the default one)`;
    return `edit ${file} (every key is in docs/configuration.md, and in lora-worker config template)`;
  });
  return [...new Set(fixes)].join("; ");
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
