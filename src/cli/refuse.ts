import { createLogger, type LogFormat } from "../logger.ts";

export interface Refusal {
  /** What stops the start, completing "refusing to start: …". */
  reason: string;
  errors: string[];
  exitCode: number;
}

// A refusal is the last line a failed start leaves: the logger's error line on stderr (one JSON object,
// with its priority on the journal's stream), or on a terminal a sentence and one line per problem.
export function refuseToStart(format: LogFormat, { reason, errors, exitCode }: Refusal): never {
  if (format === "human") process.stderr.write(`lora-worker: refusing to start, ${reason}:\n${errors.map((e) => `  - ${e}\n`).join("")}`);
  else createLogger(format, (line) => process.stderr.write(line)).error(`refusing to start: ${reason}`, { errors, exit_code: exitCode });
  process.exit(exitCode);
}
