export type Fields = Record<string, unknown>;

export interface Logger {
  info(msg: string, fields?: Fields): void;
  warn(msg: string, fields?: Fields): void;
  error(msg: string, fields?: Fields): void;
}

// One JSON object per line on stdout: journald keeps it, jq reads it.
export function createLogger(write: (line: string) => void = writeStdout): Logger {
  const emit = (level: string) => (msg: string, fields: Fields = {}) =>
    write(`${JSON.stringify({ ts: new Date().toISOString(), level, msg, ...fields })}\n`);
  return { info: emit("info"), warn: emit("warn"), error: emit("error") };
}

// A closed stdout (journald restarting, a reader gone) must not take the worker down with it.
function writeStdout(line: string): void {
  try {
    process.stdout.write(line);
  } catch {
    // nowhere left to report it
  }
}

export const silentLogger: Logger = { info() {}, warn() {}, error() {} };
