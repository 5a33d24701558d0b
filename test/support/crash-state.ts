import { Database } from "bun:sqlite";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { markedProcesses } from "../../src/os/proc.ts";
import type { HostTree } from "./host-tree.ts";

export interface StoredJob {
  id: string;
  status: string;
  shim_pid: number | null;
  pid: number | null;
  stop_reason: string | null;
  stop_requested_at: string | null;
  ended_at: string | null;
  forced_kill: number;
  error_code: string | null;
}

/** Live processes carrying the marker of a job of this tree's state dir, by job id (other tests' jobs are not ours). */
export function markedInTree(tree: HostTree): Map<string, number[]> {
  return new Map([...markedProcesses()].filter(([id]) => existsSync(join(tree.state, "jobs", id))));
}

/** The job's row as the worker wrote it, read from the real database file. */
export function storedJob(tree: HostTree, id: string): StoredJob | null {
  using db = new Database(join(tree.state, "jobs.db"), { readonly: true });
  return db.query<StoredJob, [string]>("SELECT * FROM jobs WHERE id = ?").get(id);
}

/** Writes to the real database file behind a worker's back: the state a crash at a chosen moment leaves. */
export function rewriteJob(tree: HostTree, id: string, sql: string): void {
  using db = new Database(join(tree.state, "jobs.db"));
  db.run(`UPDATE jobs SET ${sql} WHERE id = ?`, [id]);
}

export function killAll(pids: number[]): void {
  for (const pid of pids) {
    try {
      process.kill(pid, "SIGKILL");
    } catch {
      // already gone
    }
  }
}
