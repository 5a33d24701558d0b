import { existsSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { ProcessIdentity } from "./proc-stat.ts";

// The files a job directory holds, shared by the worker and the shim that outlives it:
//   launch.json   what to run (written by the worker before the shim starts)
//   trainer.json  the trainer's identity (written by the shim once it runs)
//   exit.json     how the trainer ended, or why it never started (written by the shim last)
export interface LaunchFile {
  argv: string[];
  env: Record<string, string>;
  cwd: string;
  log: string;
  logMaxBytes: number;
}

export type ExitFile =
  | { exit_code: number | null; signal: string | null; ended_at: string }
  | { spawn_error: string; ended_at: string };

export const launchPath = (dir: string) => join(dir, "launch.json");
export const trainerPath = (dir: string) => join(dir, "trainer.json");
export const exitPath = (dir: string) => join(dir, "exit.json");

// Readers never see half a file: write beside, then rename.
export function writeJsonAtomic(path: string, value: unknown): void {
  const tmp = `${path}.tmp-${process.pid}`;
  writeFileSync(tmp, JSON.stringify(value), { mode: 0o640 });
  renameSync(tmp, path);
}

export function readJsonOrNull<T>(path: string): T | null {
  if (!existsSync(path)) return null;
  try {
    return JSON.parse(readFileSync(path, "utf8")) as T;
  } catch {
    return null;
  }
}

export const readTrainer = (dir: string) => readJsonOrNull<ProcessIdentity>(trainerPath(dir));
export const readExit = (dir: string) => readJsonOrNull<ExitFile>(exitPath(dir));
