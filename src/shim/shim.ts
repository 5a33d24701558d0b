import { closeSync, existsSync, fsyncSync, ftruncateSync, openSync, renameSync, writeSync } from "node:fs";
import { basename, dirname } from "node:path";
import { readJsonOrNull, writeJsonAtomic } from "../fs.ts";
import {
  type ExitFile, exitPath, exitReservePath, launchPath, shimPath, trainerPath, type LaunchFile,
} from "../job-dir/job-dir.ts";
import { identify } from "../os/proc.ts";
import { signalGroup } from "../os/terminate.ts";
import { capLog, repairedCuts } from "../job-dir/log-cut.ts";
import { linkTmp, unlinkTmp } from "../job-dir/tmp-link.ts";

// One shim per job, like containerd's: it starts the trainer, outlives any restart of the worker,
// and records the trainer's exit status in exit.json, which nothing else could learn once the
// worker that spawned it is gone. It ignores the signals a restart or a terminal might send, so
// only the trainer's end ends it. The trainer gets its own session and process group.
const CAP_CHECK_MS = 1000;
const WRITE_RETRY_MS = 1000;

export async function runShim(jobDir: string): Promise<number> {
  for (const signal of ["SIGTERM", "SIGINT", "SIGHUP"] as const) process.on(signal, () => {});
  // Before the trainer exists: a worker that restarts now finds the shim by this file, not by luck.
  writeJsonAtomic(shimPath(jobDir), identify(process.pid));
  const launch = readJsonOrNull<LaunchFile>(launchPath(jobDir));
  if (!launch) {
    process.stderr.write(`lora-worker shim: no readable ${launchPath(jobDir)}\n`);
    return 2;
  }
  // Before the trainer writes: a log with bytes and no record of its cuts is one an older shim runs.
  try {
    repairedCuts(launch.log, launch.logMaxBytes);
  } catch {
    // no room for it (a full state dir): the run goes on, its log followed by no cursor; the first cut tries again
  }
  const proc = spawnTrainer(jobDir, launch);
  if ("spawn_error" in proc) {
    forgetTmp(jobDir);
    await recordExit(jobDir, { ...proc, ended_at: new Date().toISOString() });
    return 1;
  }
  await writeWhenPossible(trainerPath(jobDir), identify(proc.pid));
  // Under a scheduler the shim is the batch script, and the scheduler's SIGTERM (a cancel, the time limit) is for
  // the trainer: passed on to its process group. On this host only the worker signals the trainer, directly.
  if (launch.forwardSignals) {
    for (const signal of ["SIGTERM", "SIGINT"] as const) process.on(signal, () => signalGroup(proc.pid, signal));
  }
  const cap = setInterval(() => cut(launch), CAP_CHECK_MS);
  await proc.exited;
  clearInterval(cap);
  cut(launch);
  forgetTmp(jobDir);
  const signal = proc.signalCode === null ? null : String(proc.signalCode);
  const recorded = await recordExit(jobDir, { exit_code: proc.exitCode, signal, ended_at: new Date().toISOString() });
  return recorded ? 0 : 1;
}

// Into the blocks the worker reserved at launch: written in place, cut to its length and renamed, none of which
// needs a free block, so a full state dir does not keep the trainer's end unknown. Without a reservation (a run
// launched by an older worker), a write that waits for room.
async function recordExit(jobDir: string, exit: ExitFile): Promise<boolean> {
  const bytes = Buffer.from(JSON.stringify(exit));
  try {
    const fd = openSync(exitReservePath(jobDir), "r+");
    try {
      writeSync(fd, bytes, 0, bytes.length, 0);
      ftruncateSync(fd, bytes.length);
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    renameSync(exitReservePath(jobDir), exitPath(jobDir));
    return true;
  } catch {
    return writeWhenPossible(exitPath(jobDir), exit);
  }
}

// What the shim records exists nowhere else: a state dir that cannot take it now (full, say) is waited out. A job
// directory that is gone (removed with its state dir) will never take it, and nobody is left to read it: the shim
// says so and gives up (false) rather than wait forever.
async function writeWhenPossible(path: string, value: unknown): Promise<boolean> {
  for (;;) {
    try {
      writeJsonAtomic(path, value);
      return true;
    } catch {
      if (!existsSync(dirname(path))) {
        process.stderr.write(`lora-worker shim: ${dirname(path)} is gone, so ${basename(path)} cannot be written\n`);
        return false;
      }
      await Bun.sleep(WRITE_RETRY_MS);
    }
  }
}

// A cut that fails (the disk is full) is tried again at the next check; the log only grows meanwhile.
function cut(launch: LaunchFile): void {
  try {
    capLog(launch.log, launch.logMaxBytes);
  } catch {
    // retried in CAP_CHECK_MS
  }
}

// The link is this node's (on Slurm the worker's host never sees it): the trainer is gone, so is its TMPDIR.
function forgetTmp(jobDir: string): void {
  try {
    unlinkTmp(jobDir);
  } catch {
    // left for the worker, which removes it with the job directory
  }
}

// The TMPDIR link first, here where the trainer runs: a trainer without it could not make its sockets.
function spawnTrainer(jobDir: string, launch: LaunchFile) {
  const fd = openSync(launch.log, "a", 0o640);
  try {
    linkTmp(jobDir);
    const inherited = Object.fromEntries(
      (launch.inheritEnv ?? []).flatMap((name) => {
        const value = process.env[name];
        return value === undefined ? [] : [[name, value]];
      }),
    );
    return Bun.spawn(launch.argv, {
      cwd: launch.cwd,
      env: { ...inherited, ...launch.env },
      stdio: ["ignore", fd, fd],
      detached: true,
    });
  } catch (err) {
    return { spawn_error: (err as Error).message };
  } finally {
    closeSync(fd);
  }
}
