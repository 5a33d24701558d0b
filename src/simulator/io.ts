// Everything the simulator touches outside itself, passed in so each stage says what it needs (the two
// streams, the clocks, the strays a failure plan leaves behind), its seeded randomness, and what Python
// prints where the worker reads it: print(), repr() of a str, and tracebacks cut to their header and last
// line, which is all the worker classifies a failure by.
import { writeSync } from "node:fs";
import type { ScriptArgs } from "./argv.ts";
import type { Knobs } from "./knobs.ts";

export interface Io {
  stdout(text: string): void;
  stderr(text: string): void;
  /** Monotonic seconds, for tqdm's elapsed time. */
  now(): number;
  /** Unix seconds, for the time in a sample's name. */
  wallClock(): number;
  sleep(seconds: number): Promise<void>;
  /**
   * escapeGroup: setsid(), out of reach of a signal to the trainer's group. An ignored SIGTERM survives
   * exec, so the shell and every sleep it runs ignore it too.
   */
  spawnStray(escapeGroup: boolean, ignoreSigterm: boolean): void;
}

// The running sdxl_train_network.py: its streams, its flags, where it saves, and the simulator's knobs. Its logger's
// lines are print()s: under --console_log_simple, which the worker always passes, sd-scripts logs the bare message
// on stdout; rich's time and level columns otherwise are left out, as nothing reads them.
export interface Trainer {
  io: Io;
  args: ScriptArgs;
  outputDir: string;
  knobs: Knobs;
}

// Python's exit status for an uncaught exception, and for a script it cannot open or argparse's refusal.
export const [EXCEPTION_EXIT, USAGE_EXIT] = [1, 2];
export const TRACEBACK = "Traceback (most recent call last):";
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
    // A shell that sleeps forever, like a dataloader worker that outlives the trainer. No stdio, so it holds no fd
    // of the job log; the trainer's env, so the worker finds it by its job marker even after setsid(). The trainer
    // never waits for it: it must be free to exit, or die, first.
    spawnStray: (escapeGroup, ignoreSigterm) => {
      const script = `${ignoreSigterm ? 'trap "" TERM INT; ' : ""}while :; do sleep 1; done`;
      const stdio = { stdin: "ignore", stdout: "ignore", stderr: "ignore" } as const;
      Bun.spawn(["/bin/sh", "-c", script], { env, ...stdio, detached: escapeGroup }).unref();
    },
  };
}

export function print(io: Io, text: string): void {
  io.stdout(`${text}\n`);
}

// Why the process ends, on stderr, and the exit status that goes with it.
export function exitWith(io: Io, text: string, code: number): number {
  io.stderr(text);
  return code;
}

// An uncaught exception: its traceback, and Python's exit status for it.
export function raise(io: Io, exception: string): number {
  return exitWith(io, `${TRACEBACK}\n${exception}\n`, EXCEPTION_EXIT);
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

function writeAll(fd: number, text: string): void {
  const bytes = Buffer.from(text);
  for (let written = 0; written < bytes.length; ) written += writeSync(fd, bytes, written);
}
