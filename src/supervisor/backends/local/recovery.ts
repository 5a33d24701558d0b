import { readFileSync } from "node:fs";
import type { JobDir } from "../../../job-dir/job-dir.ts";
import { identify, isSameProcess, type ProcessIdentity, readBootId, readProcStat } from "../../../os/proc.ts";
import type { Found, RecordedPlacement } from "../../placement.ts";

/** A local run's two processes: the shim in its own session, and the trainer it leads in its own group. */
export interface Identities {
  shim: ProcessIdentity | null;
  trainer: ProcessIdentity | null;
}

// A run of this host found after a restart: alive when its exit is recorded or any process of it is (as recorded,
// as its job files name them, or by its marker); else the host rebooted under it, or the worker lost it. The
// identities found go on record through the run's report, as the launch would have put them.
export function judgeLocal(found: Found): Identities | "host_rebooted" | "worker_restarted" {
  const { recorded, dir, marked } = found;
  const shim = liveShim(recorded, dir, marked);
  const ids = { shim, trainer: liveTrainer(recorded, dir, marked, shim) };
  if (dir.readExit() !== null || ids.shim || ids.trainer || marked.length > 0) return ids;
  if (recorded.bootId !== null && recorded.bootId !== readBootId()) return "host_rebooted";
  return "worker_restarted";
}

function liveShim(recorded: RecordedPlacement, dir: JobDir, marked: number[]): ProcessIdentity | null {
  return alive(recorded.shim) ?? alive(dir.readShim()) ?? shimAmong(marked, dir.dir);
}

function liveTrainer(
  recorded: RecordedPlacement, dir: JobDir, marked: number[], shim: ProcessIdentity | null,
): ProcessIdentity | null {
  return alive(recorded.trainer) ?? alive(dir.readTrainer()) ?? childOf(shim, marked);
}

// The trainer is the shim's one child, leader of its own process group.
function childOf(shim: ProcessIdentity | null, pids: number[]): ProcessIdentity | null {
  const pid = shim === null ? undefined : pids.find((p) => {
    const stat = readProcStat(p);
    return stat !== null && stat.ppid === shim.pid && stat.pgrp === p;
  });
  return pid === undefined ? null : identify(pid);
}

function alive(identity: ProcessIdentity | null): ProcessIdentity | null {
  return identity !== null && isSameProcess(identity) ? identity : null;
}

// A shim that had not yet written shim.json: known by its command line, "… shim <job dir>".
function shimAmong(pids: number[], dir: string): ProcessIdentity | null {
  const pid = pids.find((p) => {
    try {
      return readFileSync(`/proc/${p}/cmdline`, "utf8").split("\0").slice(-3).join(" ").endsWith(`shim ${dir} `);
    } catch {
      return false;
    }
  });
  return pid === undefined ? null : identify(pid);
}
