import { closeSync, openSync } from "node:fs";
import { exitPath, launchPath, readJsonOrNull, shimPath, trainerPath, writeJsonAtomic, type LaunchFile } from "../supervisor/job-files.ts";
import { identify } from "../supervisor/proc-stat.ts";
import { capLog } from "./log-cap.ts";

// One shim per job, like containerd's: it starts the trainer, outlives any restart of the worker,
// and records the trainer's exit status in exit.json, which nothing else could learn once the
// worker that spawned it is gone. It ignores the signals a restart or a terminal might send, so
// only the trainer's end ends it. The trainer gets its own session and process group.
const CAP_CHECK_MS = 1000;

export async function runShim(jobDir: string): Promise<number> {
  for (const signal of ["SIGTERM", "SIGINT", "SIGHUP"] as const) process.on(signal, () => {});
  // Before the trainer exists: a worker that restarts now finds the shim by this file, not by luck.
  writeJsonAtomic(shimPath(jobDir), identify(process.pid));
  const launch = readJsonOrNull<LaunchFile>(launchPath(jobDir));
  if (!launch) {
    process.stderr.write(`lora-worker shim: no readable ${launchPath(jobDir)}\n`);
    return 2;
  }
  const proc = spawnTrainer(jobDir, launch);
  if (!proc) return 1;
  writeJsonAtomic(trainerPath(jobDir), identify(proc.pid));
  const cap = setInterval(() => capLog(launch.log, launch.logMaxBytes), CAP_CHECK_MS);
  await proc.exited;
  clearInterval(cap);
  capLog(launch.log, launch.logMaxBytes);
  const signal = proc.signalCode === null ? null : String(proc.signalCode);
  writeJsonAtomic(exitPath(jobDir), { exit_code: proc.exitCode, signal, ended_at: new Date().toISOString() });
  return 0;
}

function spawnTrainer(jobDir: string, launch: LaunchFile) {
  const fd = openSync(launch.log, "a", 0o640);
  try {
    return Bun.spawn(launch.argv, { cwd: launch.cwd, env: launch.env, stdio: ["ignore", fd, fd], detached: true });
  } catch (err) {
    writeJsonAtomic(exitPath(jobDir), { spawn_error: (err as Error).message, ended_at: new Date().toISOString() });
    return null;
  } finally {
    closeSync(fd);
  }
}
