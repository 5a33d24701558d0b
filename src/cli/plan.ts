import { loadConfig, type LoadedConfig } from "../config/load.ts";
import type { Config } from "../config/schema.ts";
import { createLogger, formatFor, type LogFormat } from "../logger.ts";
import { buildLaunch } from "../recipe/command.ts";
import { checkTrain } from "../request/check.ts";
import { createBackends } from "../supervisor/backend.ts";
import { jobPaths } from "../supervisor/job-dir.ts";
import { UsageError, parseArgs } from "./args.ts";

// The job id in a plan is the literal "plan": the real one is drawn at dispatch.
export const PLAN_JOB_ID = "plan";
export const EXIT_CONFIG = 78;

export async function planCommand(argv: string[]): Promise<number> {
  const { positional, values } = parseArgs(argv, { values: ["config"] });
  if (positional.length !== 1) throw new UsageError("plan takes exactly one REQUEST.json");
  const loaded = await loadConfigOrExit(values.config, formatFor(2, process.env.JOURNAL_STREAM));
  const body = await readRequest(positional[0]!);
  const checked = await checkTrain(body, loaded.config);
  if (!checked.ok) {
    const { error } = checked;
    const answer = error.kind === "invalid" ? { detail: error.detail } : { detail: error.detail, reason: error.kind };
    process.stdout.write(`${JSON.stringify(answer, null, 2)}\n`);
    return 1;
  }
  const { config } = loaded;
  const shim = { command: selfCommand(), path: process.env.PATH ?? "/usr/bin:/bin" };
  const gpu = createBackends(config, shim, process.env.SLURM_CONF).chosen.launch(checked.value.device);
  const paths = jobPaths(config.state_dir, PLAN_JOB_ID);
  const plan = buildLaunch(checked.value, config, paths, trainerCommand(config), gpu);
  process.stdout.write(`${JSON.stringify(plan, null, 2)}\n`);
  return 0;
}

// Serve and plan read the config alike: a plan is only exact if it would be the worker's.
export async function loadConfigOrExit(path: string | undefined, refusalFormat: LogFormat): Promise<LoadedConfig> {
  const result = await loadConfig({ path, env: process.env });
  if (result.ok) return result.value;
  refuseToStart(refusalFormat, { reason: "the configuration is invalid", errors: result.error, exitCode: EXIT_CONFIG });
}

export interface StartRefusal {
  // What stops the start, completing "refusing to start: …".
  reason: string;
  errors: string[];
  exitCode: number;
}

// A refusal is the last line a failed start leaves: the logger's error line on stderr (one JSON object,
// with its priority on the journal's stream), or on a terminal a sentence and one line per problem.
export function refuseToStart(format: LogFormat, { reason, errors, exitCode }: StartRefusal): never {
  if (format === "human") {
    const problems = errors.map((e) => `  - ${e}\n`).join("");
    process.stderr.write(`lora-worker: refusing to start, ${reason}:\n${problems}`);
  } else {
    const log = createLogger(format, (line) => process.stderr.write(line));
    log.error(`refusing to start: ${reason}`, { errors, exit_code: exitCode });
  }
  process.exit(exitCode);
}

// This program, whether compiled or run from source: it is the shim and the simulated trainer.
export function selfCommand(): string[] {
  const compiled = Bun.main.startsWith("/$bunfs/");
  return compiled ? [process.execPath] : [process.execPath, Bun.main];
}

// In simulate mode this very program stands in for accelerate; only the executable differs.
export function trainerCommand(config: Config): string[] {
  return config.trainer.mode === "real" ? [config.trainer.accelerate] : selfCommand();
}

async function readRequest(path: string): Promise<unknown> {
  const text = await Bun.file(path).text().catch(() => {
    throw new UsageError(`cannot read ${path}`);
  });
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new UsageError(`${path} is not valid JSON: ${(err as Error).message}`);
  }
}
