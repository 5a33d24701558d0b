import { readFileSync } from "node:fs";
import type { JobDir } from "../../../job-dir/job-dir.ts";
import { identify, isSameProcess, type ProcessIdentity, readBootId, readProcStat } from "../../../os/proc.ts";
import type { Job } from "../../../store/job-store.ts";
import type { Found } from "../../placement.ts";

/** A local run's two processes: the shim in its own session, and the trainer it leads in its own group. */
export interface Identities {
  shim: ProcessIdentity | null;
  trainer: ProcessIdentity | null;
}

// A run of this host found after a restart: alive when its exit is recorded or any process of it is (as recorded,
// as its job files name them, or by its marker); else the host rebooted under it, or the worker lost it.
export function judgeLocal(found: Found): Identities | "host_rebooted" | "worker_restarted" {
  const { row, dir, marked } = found;
  const shim = liveShim(row, dir, marked);
  const ids = { shim, trainer: liveTrainer(row, dir, marked, shim) };
  if (dir.readExit() !== null || ids.shim || ids.trainer || marked.length > 0) {
    recordIdentities(found, ids);
    return ids;
  }
  if (row.boot_id !== null && row.boot_id !== readBootId()) return "host_rebooted";
  return "worker_restarted";
}

// Found by files or marker, the processes go on record, as the launch would have put them (guarded: a recorded
// identity is not overwritten, the trainer's only while the job is "starting").
function recordIdentities({ row, store, now, log }: Found, ids: Identities): void {
  try {
    const current = store.get(row.id);
    if (ids.shim && current?.shim_pid === null) store.markShim(row.id, ids.shim);
    if (ids.trainer && current?.pid === null) store.markSpawned(row.id, ids.trainer, now().toISOString());
  } catch (err) {
    log.error("could not record the processes of a re-adopted job", { job_id: row.id, error: (err as Error).message });
  }
}

function liveShim(job: Job, dir: JobDir, marked: number[]): ProcessIdentity | null {
  const recorded = { pid: job.shim_pid ?? -1, startTicks: job.shim_start_ticks, bootId: job.boot_id };
  return alive(recorded) ?? alive(dir.readShim()) ?? shimAmong(marked, dir.dir);
}

function liveTrainer(job: Job, dir: JobDir, marked: number[], shim: ProcessIdentity | null): ProcessIdentity | null {
  const recorded = { pid: job.pid ?? -1, startTicks: job.pid_start_ticks, bootId: job.boot_id };
  return alive(recorded) ?? alive(dir.readTrainer()) ?? childOf(shim, marked);
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
