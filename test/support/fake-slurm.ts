import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { writeExecutable } from "./scratch-files.ts";

const FAKE_SLURM = join(import.meta.dir, "fake-slurm");
const COMMANDS = ["sbatch", "scontrol", "scancel", "squeue"] as const;

export interface FakeSlurm extends Disposable {
  /** slurm.bin_dir for the worker's config. */
  binDir: string;
  /** While held, new jobs wait PENDING (Reason=Resources); released, a pending job starts when next looked at. */
  hold(on: boolean): void;
  /** sbatch refuses every job with this message; null takes it back. */
  refuse(message: string | null): void;
  /** scontrol show node fails. */
  failNodes(on: boolean): void;
}

/** Slurm's client commands for one host (see fake-slurm); disposing kills every job it started. */
export function fakeSlurm(dir: string): FakeSlurm {
  const state = join(dir, "fake-slurm");
  const binDir = join(dir, "fake-slurm-bin");
  mkdirSync(state, { recursive: true });
  mkdirSync(binDir, { recursive: true });
  for (const command of COMMANDS) {
    const wrapper = `#!/bin/sh\nexport FAKE_SLURM_STATE='${state}'\nexec bash '${FAKE_SLURM}' ${command} "$@"\n`;
    writeExecutable(join(binDir, command), wrapper);
  }
  const toggle = (name: string, text: string | null) =>
    text === null ? rmSync(join(state, name), { force: true }) : writeFileSync(join(state, name), text);
  return {
    binDir,
    hold: (on) => toggle("hold", on ? "" : null),
    refuse: (message) => toggle("refuse", message),
    failNodes: (on) => toggle("nodes-fail", on ? "" : null),
    [Symbol.dispose]: () => killJobs(join(state, "jobs")),
  };
}

// Each job's script runs in a session of its own, led by the recorded pid.
function killJobs(jobs: string) {
  if (!existsSync(jobs)) return;
  for (const id of readdirSync(jobs)) {
    const pidFile = join(jobs, id, "pid");
    if (!existsSync(pidFile) || existsSync(join(jobs, id, "exit"))) continue;
    try {
      process.kill(-Number(readFileSync(pidFile, "utf8")), "SIGKILL");
    } catch {
      // already gone
    }
  }
}
