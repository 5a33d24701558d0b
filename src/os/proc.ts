import { readFileSync, readdirSync } from "node:fs";
import { hasEntry } from "../fs.ts";

// /proc/<pid>/stat: "pid (comm) state ppid pgrp ... starttime(22) ..."; comm may hold spaces and ")".
interface ProcStat {
  pid: number;
  state: string;
  ppid: number;
  pgrp: number;
  startTicks: number;
}

export interface ProcessIdentity {
  pid: number;
  startTicks: number | null;
  bootId: string | null;
}

export function readProcStat(pid: number): ProcStat | null {
  let text: string;
  try {
    text = readFileSync(`/proc/${pid}/stat`, "utf8");
  } catch {
    return null;
  }
  const fields = text.slice(text.lastIndexOf(")") + 2).split(" ");
  return {
    pid,
    state: fields[0] ?? "?",
    ppid: Number(fields[1]),
    pgrp: Number(fields[2]),
    startTicks: Number(fields[19]),
  };
}

// A boot's id cannot change under a running process: read once, not at every liveness check.
let bootId: string | null | undefined;
export function readBootId(): string | null {
  if (bootId !== undefined) return bootId;
  try {
    bootId = readFileSync("/proc/sys/kernel/random/boot_id", "utf8").trim();
  } catch {
    bootId = null;
  }
  return bootId;
}

export function identify(pid: number): ProcessIdentity {
  return { pid, startTicks: readProcStat(pid)?.startTicks ?? null, bootId: readBootId() };
}

// The same process, not merely the same pid: a reused pid has another start time.
export function isSameProcess(identity: ProcessIdentity): boolean {
  const stat = readProcStat(identity.pid);
  if (stat === null || stat.state === "Z") return false;
  return stat.startTicks === identity.startTicks && readBootId() === identity.bootId;
}

export function listPids(): number[] {
  return readdirSync("/proc").flatMap((name) => (/^\d+$/.test(name) ? [Number(name)] : []));
}

// This process's cgroup v2 directory under /sys/fs/cgroup (the unit's, under systemd), or null without a v2 view.
function ownCgroupDir(): string | null {
  const path = ownCgroupPath("0::");
  return path === null ? null : `/sys/fs/cgroup${path}`;
}

// The path after `prefix` in /proc/self/cgroup ("0::" for v2, "<n>:memory:" for v1's memory controller).
function ownCgroupPath(prefix: string | RegExp): string | null {
  try {
    const lines = readFileSync("/proc/self/cgroup", "utf8").split("\n");
    const line = lines.find((l) => (typeof prefix === "string" ? l.startsWith(prefix) : prefix.test(l)));
    return line === undefined ? null : line.slice(line.indexOf(":", line.indexOf(":") + 1) + 1).replace(/\/$/, "");
  } catch {
    return null;
  }
}

// The kernel counts its OOM killer's kills in a cgroup ("oom_kill N"): cgroup v2 in memory.events, v1's memory
// controller in memory.oom_control. The trainer runs in the worker's own cgroup (the unit's: KillMode=process keeps it
// there), so a count that rises during a run is proof that the OOM killer struck it. Null: no such proof here.
export function ownMemoryEvents(): string | null {
  const v2 = ownCgroupDir();
  const events = v2 === null ? null : `${v2}/memory.events`;
  if (events !== null && hasEntry(events)) return events;
  const v1 = ownCgroupPath(/^\d+:memory:/);
  const oomControl = v1 === null ? null : `/sys/fs/cgroup/memory${v1}/memory.oom_control`;
  return oomControl !== null && hasEntry(oomControl) ? oomControl : events;
}

export function readOomKills(memoryEvents: string | null): number | null {
  if (memoryEvents === null) return null;
  try {
    const match = /^oom_kill (\d+)$/m.exec(readFileSync(memoryEvents, "utf8"));
    return match ? Number(match[1]) : null;
  } catch {
    return null;
  }
}

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
