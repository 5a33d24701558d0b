import { readFileSync, readdirSync } from "node:fs";

// /proc/<pid>/stat: "pid (comm) state ppid pgrp ... starttime(22) ..."; comm may hold spaces and ")".
export interface ProcStat {
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
export function ownCgroupDir(): string | null {
  try {
    const line = readFileSync("/proc/self/cgroup", "utf8").split("\n").find((l) => l.startsWith("0::"));
    return line === undefined ? null : `/sys/fs/cgroup${line.slice(3).replace(/\/$/, "")}`;
  } catch {
    return null;
  }
}
