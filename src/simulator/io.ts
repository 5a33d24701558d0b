// Everything the simulator touches outside itself, passed in so each stage says what it needs: the
// two streams, the clocks, sd-scripts' logger, and the strays a failure plan leaves behind.
import { writeSync } from "node:fs";

export interface Io {
  stdout(text: string): void;
  stderr(text: string): void;
  // Monotonic seconds, for tqdm's elapsed time.
  now(): number;
  // Unix seconds, for timestamps sd-scripts records.
  wallClock(): number;
  sleep(seconds: number): Promise<void>;
  spawnStray(stray: Stray): void;
}

export interface Stray {
  // setsid(): a new session and process group, out of reach of a signal to the trainer's group.
  escapeGroup: boolean;
  // Ignored signals survive exec, so the shell and every sleep it runs ignore them too.
  ignoreSigterm: boolean;
}

export type Log = (level: "INFO" | "ERROR", message: string) => void;

// Synchronous writes: PYTHONUNBUFFERED output lands in order, and is on disk before any signal.
export function processIo(env: Record<string, string | undefined>): Io {
  return {
    stdout: (text) => writeAll(1, text),
    stderr: (text) => writeAll(2, text),
    now: () => performance.now() / 1000,
    wallClock: () => Date.now() / 1000,
    sleep: (seconds) => Bun.sleep(seconds * 1000),
    spawnStray: (stray) => spawnStray(env, stray),
  };
}

// Python's print(): the text and a newline, on stdout.
export function print(io: Io, text: string): void {
  io.stdout(`${text}\n`);
}

// sd-scripts' setup_logging: --console_log_simple prints the bare message on stdout; otherwise rich's
// handler writes a local time and a level column on stderr.
export function createLog(io: Io, simple: boolean): Log {
  if (simple) return (_level, message) => print(io, message);
  return (level, message) => io.stderr(`${localTime(io.wallClock())} ${level.padEnd(8)} ${message}\n`);
}

// logging's datefmt "%Y-%m-%d %H:%M:%S".
export function localTime(unixSeconds: number): string {
  const at = new Date(unixSeconds * 1000);
  const two = (value: number) => String(value).padStart(2, "0");
  const date = `${at.getFullYear()}-${two(at.getMonth() + 1)}-${two(at.getDate())}`;
  return `${date} ${two(at.getHours())}:${two(at.getMinutes())}:${two(at.getSeconds())}`;
}

// A shell that sleeps forever, like a dataloader worker that outlives the trainer. No stdio, so it holds
// no fd of the job log; the trainer's env, so the worker finds it by its job marker even after setsid().
function spawnStray(env: Record<string, string | undefined>, { escapeGroup, ignoreSigterm }: Stray): void {
  const script = `${ignoreSigterm ? 'trap "" TERM INT; ' : ""}while :; do sleep 1; done`;
  const stdio = { stdin: "ignore", stdout: "ignore", stderr: "ignore" } as const;
  const stray = Bun.spawn(["/bin/sh", "-c", script], { env, ...stdio, detached: escapeGroup });
  // The trainer never waits for it: it must be free to exit, or die, first.
  stray.unref();
}

function writeAll(fd: number, text: string): void {
  const bytes = Buffer.from(text);
  for (let written = 0; written < bytes.length; ) written += writeSync(fd, bytes, written);
}
