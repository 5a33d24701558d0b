import { closeSync, openSync, readFileSync, statfsSync, unlinkSync, writeSync } from "node:fs";
import { join } from "node:path";
import { identify, isSameProcess, type ProcessIdentity } from "../os/proc.ts";
import type { JobStore, WriteFailure } from "./job-store.ts";

// The state dir, apart from the database in it: which worker holds it (the lock), and whether it takes writes.

// Below this the state dir is full in all but name: the next train.log or WAL page would not fit.
const STATE_MIN_FREE_BYTES = 1024 * 1024;

export interface StateHealth {
  /** Null while the state dir takes writes; otherwise why not, and since when. */
  failure(): WriteFailure | null;
  /** The state dir's own free space is below the minimum (a write would fail): checked before a claim. */
  full(): WriteFailure | null;
}

// Two kinds of evidence: a write the database refused, and the free space of the state dir's file system (an
// idle worker writes nothing, so only the second can tell that the disk filled while nothing ran).
export function createStateHealth(store: JobStore, dir: string, now: () => Date): StateHealth {
  let fullSince: string | null = null;
  const full = (): WriteFailure | null => {
    const error = stateDirFull(dir);
    if (error === null) return (fullSince = null);
    fullSince ??= now().toISOString();
    return { error, since: fullSince };
  };
  return { failure: () => store.writeFailure() ?? full(), full };
}

/** Why the state dir `dir` is full, naming it; null while it has room (or cannot be looked at). */
export function stateDirFull(dir: string): string | null {
  const free = freeBytes(dir);
  if (free === null || free >= STATE_MIN_FREE_BYTES) return null;
  return `the state dir's disk is full: ${free} bytes free at ${dir}, below ${STATE_MIN_FREE_BYTES}`;
}

function freeBytes(dir: string): number | null {
  try {
    const fs = statfsSync(dir);
    return fs.bavail * fs.bsize;
  } catch {
    return null;
  }
}

export class LockHeld extends Error {}

interface InstanceLock {
  // The last worker on this state dir released its lock: it stopped cleanly, so no integrity check is owed.
  cleanBefore: boolean;
  release(): void;
}

// One worker per state_dir. The lock names its holder by pid, start time and boot, so a lock left
// by a worker killed with -9 is recognised as stale even if its pid has been reused since.
export function acquireInstanceLock(stateDir: string): InstanceLock {
  const path = join(stateDir, "lock");
  const me = identify(process.pid);
  const cleanBefore = tryCreate(path, me);
  if (!cleanBefore) {
    const holder = readHolder(path);
    if (holder && isSameProcess(holder)) {
      throw new LockHeld(
        `another lora-worker (pid ${holder.pid}) already uses ${stateDir}; ` +
          "stop it first or give this one another state_dir",
      );
    }
    unlinkSync(path);
    if (!tryCreate(path, me)) throw new LockHeld(`another lora-worker took ${path} while this one was starting`);
  }
  return {
    cleanBefore,
    release() {
      const holder = readHolder(path);
      if (holder?.pid === me.pid && holder.startTicks === me.startTicks) unlinkSync(path);
    },
  };
}

function tryCreate(path: string, me: ProcessIdentity): boolean {
  let fd: number;
  try {
    fd = openSync(path, "wx", 0o640);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "EEXIST") return false;
    throw err;
  }
  writeSync(fd, JSON.stringify(me));
  closeSync(fd);
  return true;
}

function readHolder(path: string): ProcessIdentity | null {
  try {
    return JSON.parse(readFileSync(path, "utf8")) as ProcessIdentity;
  } catch {
    return null;
  }
}
