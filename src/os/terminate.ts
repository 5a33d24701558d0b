import { markedProcessesOf, listPids, readProcStat } from "./proc.ts";

const POLL_MS = 20;
// What escaped the job's process group gets this long after SIGTERM (and again after SIGKILL).
const SWEEP_GRACE_MS = 2000;

interface Termination {
  forced: boolean;
}

// A zombie holds no memory and no GPU context: it counts as gone.
export function liveGroupMembers(pgid: number): number[] {
  return listPids().filter((pid) => {
    const stat = readProcStat(pid);
    return stat !== null && stat.pgrp === pgid && stat.state !== "Z";
  });
}

export function signalGroup(pgid: number, signal: NodeJS.Signals): boolean {
  try {
    process.kill(-pgid, signal);
    return true;
  } catch {
    return false;
  }
}

function signalEach(pids: number[], signal: NodeJS.Signals): void {
  for (const pid of pids) {
    try {
      process.kill(pid, signal);
    } catch {
      // already gone
    }
  }
}

async function waitNone(alive: () => number[], timeoutMs: number): Promise<boolean> {
  const deadline = performance.now() + timeoutMs;
  while (alive().length > 0) {
    if (performance.now() >= deadline) return false;
    await Bun.sleep(POLL_MS);
  }
  return true;
}

// SIGTERM, the grace, then SIGKILL to whatever is still alive: decided by what lives, not by who exited.
async function escalate(
  alive: () => number[],
  signal: (sig: NodeJS.Signals) => void,
  graceMs: number,
): Promise<Termination> {
  signal("SIGTERM");
  if (await waitNone(alive, graceMs)) return { forced: false };
  signal("SIGKILL");
  await waitNone(alive, graceMs);
  return { forced: true };
}

// The whole group, not the leader: a grandchild can outlive accelerate.
export function terminateGroup(pgid: number, graceMs: number): Promise<Termination> {
  return escalate(() => liveGroupMembers(pgid), (sig) => signalGroup(pgid, sig), graceMs);
}

// Decided by the whole group; used where the group was already signalled.
export function waitGroupGone(pgid: number, timeoutMs: number): Promise<boolean> {
  return waitNone(() => liveGroupMembers(pgid), timeoutMs);
}

// Whatever still carries the job's marker, in or out of its group; says how many there were.
export async function sweepStrays(jobId: string): Promise<number> {
  const found = markedProcessesOf(jobId);
  if (found.length > 0) {
    await escalate(() => markedProcessesOf(jobId), (sig) => signalEach(markedProcessesOf(jobId), sig), SWEEP_GRACE_MS);
  }
  return found.length;
}

const RETRY_MS = 250;

// Work that must happen (stopping a job's processes) is retried while the host says no (no descriptor
// left, say); the first refusal is reported, the rest would only repeat it.
export async function untilDone<T>(work: () => Promise<T>, onFirstFailure: (err: Error) => void): Promise<T> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await work();
    } catch (err) {
      if (attempt === 0) onFirstFailure(err as Error);
      await Bun.sleep(RETRY_MS);
    }
  }
}
