import { listPids, readProcStat } from "./proc-stat.ts";

const GROUP_POLL_MS = 20;

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

// Decided by the whole group, not the leader: a grandchild can outlive accelerate.
export async function waitGroupGone(pgid: number, timeoutMs: number): Promise<boolean> {
  const deadline = performance.now() + timeoutMs;
  while (liveGroupMembers(pgid).length > 0) {
    if (performance.now() >= deadline) return false;
    await Bun.sleep(GROUP_POLL_MS);
  }
  return true;
}

export interface Termination {
  forced: boolean;
}

// SIGTERM to the group, then SIGKILL to whatever of it is still alive after the grace period.
export async function terminateGroup(pgid: number, graceMs: number): Promise<Termination> {
  signalGroup(pgid, "SIGTERM");
  if (await waitGroupGone(pgid, graceMs)) return { forced: false };
  signalGroup(pgid, "SIGKILL");
  await waitGroupGone(pgid, graceMs);
  return { forced: true };
}
