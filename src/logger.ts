import { fstatSync } from "node:fs";
import { isatty } from "node:tty";

type Fields = Record<string, unknown>;

export interface Logger {
  info(msg: string, fields?: Fields): void;
  warn(msg: string, fields?: Fields): void;
  error(msg: string, fields?: Fields): void;
}

type Level = keyof Logger;

// "journal" is JSON behind a syslog priority, which journald strips and records as PRIORITY (sd-daemon(3)).
export type LogFormat = "json" | "journal" | "human";

const PRIORITY: Record<Level, string> = { error: "<3>", warn: "<4>", info: "<6>" };

// journald and jq get one JSON object per line; a person at a terminal gets a readable line.
export function createLogger(format: LogFormat = "json", write: (line: string) => void = writeStdout): Logger {
  const line = format === "human" ? humanLine : jsonLine;
  const prefix = (level: Level) => (format === "journal" ? PRIORITY[level] : "");
  const emit = (level: Level) => (msg: string, fields: Fields = {}) =>
    write(prefix(level) + line(new Date(), level, msg, fields));
  return { info: emit("info"), warn: emit("warn"), error: emit("error") };
}

// systemd names the journal's stream in JOURNAL_STREAM as "device:inode"; only a descriptor that is that
// stream gets priorities, so a redirected or piped worker that inherited the variable writes plain JSON.
export function formatFor(fd: number, journalStream: string | undefined): LogFormat {
  if (isatty(fd)) return "human";
  return journalStream !== undefined && journalStream === deviceInode(fd) ? "journal" : "json";
}

function deviceInode(fd: number): string | null {
  try {
    const stat = fstatSync(fd, { bigint: true });
    return `${stat.dev}:${stat.ino}`;
  } catch {
    return null;
  }
}

function jsonLine(at: Date, level: Level, msg: string, fields: Fields): string {
  return `${JSON.stringify({ ts: at.toISOString(), level, msg, ...fields })}\n`;
}

function humanLine(at: Date, level: Level, msg: string, fields: Fields): string {
  // A string without spaces reads bare; anything else as JSON, so the line still splits on spaces.
  const shown = (v: unknown) => (typeof v === "string" && !/\s/.test(v) ? v : JSON.stringify(v));
  const rest = Object.entries(fields).map(([k, v]) => `${k}=${shown(v)}`);
  const tail = rest.length ? `  ${rest.join(" ")}` : "";
  return `${at.toISOString().slice(11, 23)} ${level.toUpperCase().padEnd(5)} ${msg}${tail}\n`;
}

// A closed stdout (journald restarting, a reader gone) must not take the worker down with it.
function writeStdout(line: string): void {
  try {
    process.stdout.write(line);
  } catch {
    // nowhere left to report it
  }
}
