import { closeSync, openSync, readFileSync, unlinkSync, writeSync } from "node:fs";
import { join } from "node:path";
import { identify, isSameProcess, type ProcessIdentity } from "../os/proc.ts";

export class LockHeld extends Error {}

export interface InstanceLock {
  /** The last worker on this state dir released its lock: it stopped cleanly, so no integrity check is owed. */
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
      throw new LockHeld(`another lora-worker (pid ${holder.pid}) already uses ${stateDir}; stop it first or give this one another state_dir`);
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
