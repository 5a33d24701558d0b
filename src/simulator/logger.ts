// sd-scripts' logging (library/utils.py setup_logging): with --console_log_simple, the bare message
// on stdout; otherwise rich's handler on stderr, with a time column left blank while the second
// has not changed, and a level column.
import { print, type Io } from "./io.ts";

export type Level = "INFO" | "WARNING" | "ERROR";
export type Log = (level: Level, message: string) => void;

const LEVEL_WIDTH = 8;

export function createLog(io: Io, simple: boolean): Log {
  if (simple) return (_level, message) => print(io, message);
  let lastTime = "";
  return (level, message) => {
    const time = localTime(io.wallClock());
    const column = time === lastTime ? " ".repeat(time.length) : time;
    lastTime = time;
    io.stderr(`${column} ${level.padEnd(LEVEL_WIDTH)} ${message}\n`);
  };
}

// logging's datefmt "%Y-%m-%d %H:%M:%S", in local time.
function localTime(unixSeconds: number): string {
  const at = new Date(unixSeconds * 1000);
  const two = (value: number) => String(value).padStart(2, "0");
  const date = `${at.getFullYear()}-${two(at.getMonth() + 1)}-${two(at.getDate())}`;
  return `${date} ${two(at.getHours())}:${two(at.getMinutes())}:${two(at.getSeconds())}`;
}
