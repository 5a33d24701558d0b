import { readFileSync } from "node:fs";
import { listPids, readProcStat } from "./proc-stat.ts";

// Every trainer environment carries this marker; children inherit it, even those that setsid()
// out of the job's process group, so a leftover is recognised by it and by nothing weaker.
export const JOB_MARKER_ENV = "LORA_WORKER_JOB";

const SWEEP_GRACE_MS = 2000;
const SWEEP_POLL_MS = 20;

// Candidates are the processes of our own cgroup (the unit's, under systemd); elsewhere, all of /proc.
function candidatePids(): number[] {
  try {
    const line = readFileSync("/proc/self/cgroup", "utf8").split("\n").find((l) => l.startsWith("0::"));
    if (line) {
      const procs = readFileSync(`/sys/fs/cgroup${line.slice(3)}/cgroup.procs`, "utf8");
      return procs.split("\n").filter((p) => p !== "").map(Number);
    }
  } catch {
    // no cgroup v2 view: fall through
  }
  return listPids();
}

function carriesMarker(pid: number, jobId: string): boolean {
  try {
    const environ = readFileSync(`/proc/${pid}/environ`, "latin1");
    return environ.split("\0").includes(`${JOB_MARKER_ENV}=${jobId}`);
  } catch {
    return false;
  }
}

export function strayProcesses(jobId: string): number[] {
  return candidatePids().filter((pid) => {
    const stat = pid === process.pid ? null : readProcStat(pid);
    return stat !== null && stat.state !== "Z" && carriesMarker(pid, jobId);
  });
}

// SIGTERM, a short grace, then SIGKILL for whatever of the job still runs outside its group.
export async function sweepStrays(jobId: string): Promise<number> {
  const found = strayProcesses(jobId);
  for (const pid of found) signal(pid, "SIGTERM");
  const deadline = performance.now() + SWEEP_GRACE_MS;
  while (strayProcesses(jobId).length > 0 && performance.now() < deadline) await Bun.sleep(SWEEP_POLL_MS);
  const stubborn = strayProcesses(jobId);
  for (const pid of stubborn) signal(pid, "SIGKILL");
  while (strayProcesses(jobId).length > 0 && performance.now() < deadline + SWEEP_GRACE_MS) await Bun.sleep(SWEEP_POLL_MS);
  return found.length;
}

function signal(pid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(pid, sig);
  } catch {
    // already gone
  }
}
