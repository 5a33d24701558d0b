export type Fields = Record<string, unknown>;

export interface Logger {
  info(msg: string, fields?: Fields): void;
  warn(msg: string, fields?: Fields): void;
  error(msg: string, fields?: Fields): void;
}

export type LogFormat = "json" | "human";

// journald and jq get one JSON object per line; a person at a terminal gets a readable line.
export function createLogger(format: LogFormat = "json", write: (line: string) => void = writeStdout): Logger {
  const line = format === "json" ? jsonLine : humanLine;
  const emit = (level: string) => (msg: string, fields: Fields = {}) => write(line(new Date(), level, msg, fields));
  return { info: emit("info"), warn: emit("warn"), error: emit("error") };
}

function jsonLine(at: Date, level: string, msg: string, fields: Fields): string {
  return `${JSON.stringify({ ts: at.toISOString(), level, msg, ...fields })}\n`;
}

function humanLine(at: Date, level: string, msg: string, fields: Fields): string {
  const rest = Object.entries(fields).map(([k, v]) => `${k}=${typeof v === "string" && !/\s/.test(v) ? v : JSON.stringify(v)}`);
  return `${at.toISOString().slice(11, 23)} ${level.toUpperCase().padEnd(5)} ${msg}${rest.length ? `  ${rest.join(" ")}` : ""}\n`;
}

// A closed stdout (journald restarting, a reader gone) must not take the worker down with it.
function writeStdout(line: string): void {
  try {
    process.stdout.write(line);
  } catch {
    // nowhere left to report it
  }
}
