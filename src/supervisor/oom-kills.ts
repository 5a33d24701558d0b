import { readFileSync } from "node:fs";
import { ownCgroupDir } from "../os/proc.ts";

// cgroup v2 counts the kernel OOM killer's kills in a cgroup's memory.events ("oom_kill N"). The trainer runs in
// the worker's own cgroup (the unit's: KillMode=process keeps it there), so a count that rises during a run is
// proof that the OOM killer struck it. Null where there is no cgroup v2 view: then there is no such proof.
export function ownMemoryEvents(): string | null {
  const cgroup = ownCgroupDir();
  return cgroup === null ? null : `${cgroup}/memory.events`;
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
