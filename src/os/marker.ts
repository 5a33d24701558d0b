import { readFileSync } from "node:fs";
import { listPids, ownCgroupDir, readProcStat } from "./proc.ts";

// Every process a job starts carries this marker in its environment: the shim, the trainer and whatever
// they start, even what setsid()s out of the job's process group. A process is tied to a job by it and
// by nothing weaker.
export const JOB_MARKER_ENV = "LORA_WORKER_JOB";
const MARKER_PREFIX = `${JOB_MARKER_ENV}=`;

// Candidates are the processes of our own cgroup (the unit's, under systemd); elsewhere, all of /proc.
function candidatePids(): number[] {
  try {
    const cgroup = ownCgroupDir();
    if (cgroup !== null) {
      const procs = readFileSync(`${cgroup}/cgroup.procs`, "utf8");
      return procs.split("\n").filter((p) => p !== "").map(Number);
    }
  } catch {
    // no cgroup v2 view: fall through
  }
  return listPids();
}

// A process that is gone or not ours to read has no marker we could act on; running out of descriptors is
// no answer at all and is thrown, so a sweep is not taken for clean when it could not look.
function markerOf(pid: number): string | null {
  try {
    const entry = readFileSync(`/proc/${pid}/environ`, "latin1").split("\0").find((e) => e.startsWith(MARKER_PREFIX));
    return entry === undefined ? null : entry.slice(MARKER_PREFIX.length);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === "EMFILE" || code === "ENFILE") throw err;
    return null;
  }
}

// Live processes (zombies hold nothing) other than this one that carry a job's marker, by job id.
export function markedProcesses(): Map<string, number[]> {
  const byJob = new Map<string, number[]>();
  for (const pid of candidatePids()) {
    if (pid === process.pid) continue;
    const stat = readProcStat(pid);
    const job = stat === null || stat.state === "Z" ? null : markerOf(pid);
    if (job !== null) byJob.set(job, [...(byJob.get(job) ?? []), pid]);
  }
  return byJob;
}

export function markedProcessesOf(jobId: string): number[] {
  return markedProcesses().get(jobId) ?? [];
}
