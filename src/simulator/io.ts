// Everything the simulator touches outside itself, passed in so each piece can say what it needs.
import { writeSync } from "node:fs";
import { spawnStray, type Stray } from "./stray-worker.ts";

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

// Synchronous writes: PYTHONUNBUFFERED output lands in order, and is on disk before any signal.
// Strays inherit `env`, the trainer's own environment.
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

function writeAll(fd: number, text: string): void {
  const bytes = Buffer.from(text);
  for (let written = 0; written < bytes.length; ) written += writeSync(fd, bytes, written);
}
