import { loadConfig, type LoadedConfig } from "../config/load.ts";
import { createLogger, type LogFormat } from "../logger.ts";
import { printable } from "../printable.ts";

// The config is unusable, or names an address serve cannot listen on (sysexits' EX_CONFIG).
export const EXIT_CONFIG = 78;
// The state dir is taken or damaged (sysexits' EX_CANTCREAT).
export const EXIT_STATE = 73;
// Neither is helped by a restart: the unit's RestartPreventExitStatus= names both.

// Serve and plan read the config alike: a plan is only exact if it would be the worker's.
export async function loadConfigOrExit(path: string | undefined, refusalFormat: LogFormat): Promise<LoadedConfig> {
  const result = await loadConfig({ path, env: process.env });
  if (result.ok) return result.value;
  refuseToStart(refusalFormat, { reason: "the configuration is invalid", errors: result.error, exitCode: EXIT_CONFIG });
}

interface StartRefusal {
  // What stops the start, completing "refusing to start: …".
  reason: string;
  errors: string[];
  exitCode: number;
}

// A refusal is the last line a failed start leaves: the logger's error line on stderr (one JSON object,
// with its priority on the journal's stream), or on a terminal a sentence and one line per problem.
export function refuseToStart(format: LogFormat, { reason, errors, exitCode }: StartRefusal): never {
  if (format === "human") {
    // One cause is one line (what a terminal or `systemctl status` shows whole); several are a list.
    const problems = errors.length === 1 ? ` ${errors[0]}\n` : `\n${errors.map((e) => `  - ${e}\n`).join("")}`;
    process.stderr.write(printable(`lora-worker: refusing to start, ${reason}:${problems}`));
  } else {
    const log = createLogger(format, (line) => process.stderr.write(line));
    log.error(`refusing to start: ${reason}`, { errors, exit_code: exitCode });
  }
  process.exit(exitCode);
}
