// Everything the simulator touches outside itself, passed in so each stage says what it needs (the two
// streams, the clocks, the strays a failure plan leaves behind), its seeded randomness, and what Python
// prints where the worker or a test reads it: sd-scripts' logger, str() and repr(), and tracebacks cut to
// their header and last line, which is all the worker classifies a failure by.
import { writeSync } from "node:fs";
import type { ScriptArgs } from "./argv.ts";

export interface Io {
  stdout(text: string): void;
  stderr(text: string): void;
  // Monotonic seconds, for tqdm's elapsed time.
  now(): number;
  // Unix seconds, for timestamps sd-scripts records.
  wallClock(): number;
  sleep(seconds: number): Promise<void>;
  // escapeGroup: setsid(), out of reach of a signal to the trainer's group. An ignored SIGTERM survives
  // exec, so the shell and every sleep it runs ignore it too.
  spawnStray(escapeGroup: boolean, ignoreSigterm: boolean): void;
}

export type Log = (level: "INFO" | "ERROR", message: string) => void;

// The running sdxl_train_network.py: its streams, its logger, its flags and where it saves.
export interface Trainer {
  io: Io;
  log: Log;
  args: ScriptArgs;
  outputDir: string;
}

// torch's allocator's message, cut before its advice on fragmentation.
export const CUDA_OOM =
  "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total capacity of " +
  "23.56 GiB of which 11.69 MiB is free.";
// What sd-scripts hits first when a path flag it needs was never given.
export const PATH_NOT_GIVEN = "TypeError: stat: path should be string, bytes, os.PathLike or integer, not NoneType";

// Synchronous writes: PYTHONUNBUFFERED output lands in order, and is on disk before any signal.
export function processIo(env: Record<string, string | undefined>): Io {
  return {
    stdout: (text) => writeAll(1, text),
    stderr: (text) => writeAll(2, text),
    now: () => performance.now() / 1000,
    wallClock: () => Date.now() / 1000,
    sleep: (seconds) => Bun.sleep(seconds * 1000),
    spawnStray: (escapeGroup, ignoreSigterm) => spawnStray(env, escapeGroup, ignoreSigterm),
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

export function traceback(exception: string): string {
  return `Traceback (most recent call last):\n${exception}\n`;
}

// An uncaught exception: its traceback on stderr, and Python's exit status for it.
export function raise(io: Io, exception: string): 1 {
  io.stderr(traceback(exception));
  return 1;
}

// `str(x)` for a float: shortest round-trip digits, scientific outside 1e-4 <= |x| < 1e16.
export function pyFloatStr(x: number): string {
  if (!Number.isFinite(x)) return Number.isNaN(x) ? "nan" : x > 0 ? "inf" : "-inf";
  if (Number.isInteger(x) && Math.abs(x) < 1e16) return x.toFixed(1);
  const [mantissa = "", exponent = ""] = x.toExponential().split("e");
  const power = Number(exponent);
  if (power >= -4 && power < 16) return String(x);
  return `${mantissa}e${power < 0 ? "-" : "+"}${String(Math.abs(power)).padStart(2, "0")}`;
}

// `repr(s)` for a str: single quotes unless the text holds a single quote and no double quote.
export function pyStrRepr(text: string): string {
  const quote = text.includes("'") && !text.includes('"') ? '"' : "'";
  const escapes: Record<string, string> = { "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t" };
  escapes[quote] = `\\${quote}`;
  return quote + text.replace(/[\\'"\n\r\t]/g, (char) => escapes[char] ?? char) + quote;
}

// `repr()` of what json.load returns (a JSON 4.0 reads back here as the int 4).
export function pyRepr(value: unknown): string {
  if (value === null) return "None";
  if (typeof value === "boolean") return value ? "True" : "False";
  if (typeof value === "number") return Number.isInteger(value) ? String(value) : pyFloatStr(value);
  if (typeof value === "string") return pyStrRepr(value);
  if (Array.isArray(value)) return `[${value.map(pyRepr).join(", ")}]`;
  const entries = Object.entries(value as Record<string, unknown>);
  return `{${entries.map(([key, item]) => `${pyStrRepr(key)}: ${pyRepr(item)}`).join(", ")}}`;
}

// mulberry32: a tiny 32-bit PRNG, so the same --seed always gives the same losses and weights.
export function seededRandom(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let mixed = Math.imul(state ^ (state >>> 15), state | 1);
    mixed ^= mixed + Math.imul(mixed ^ (mixed >>> 7), mixed | 61);
    return ((mixed ^ (mixed >>> 14)) >>> 0) / 2 ** 32;
  };
}

// A shell that sleeps forever, like a dataloader worker that outlives the trainer. No stdio, so it holds no fd
// of the job log; the trainer's env, so the worker finds it by its job marker even after setsid().
function spawnStray(env: Record<string, string | undefined>, escapeGroup: boolean, ignoreSigterm: boolean): void {
  const script = `${ignoreSigterm ? 'trap "" TERM INT; ' : ""}while :; do sleep 1; done`;
  const stdio = { stdin: "ignore", stdout: "ignore", stderr: "ignore" } as const;
  // The trainer never waits for it: it must be free to exit, or die, first.
  Bun.spawn(["/bin/sh", "-c", script], { env, ...stdio, detached: escapeGroup }).unref();
}

function writeAll(fd: number, text: string): void {
  const bytes = Buffer.from(text);
  for (let written = 0; written < bytes.length; ) written += writeSync(fd, bytes, written);
}
