import { Database } from "bun:sqlite";
import { existsSync, lstatSync, readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";
import type { HostTree } from "./host-tree.ts";

/** Every entry under the tree but the state dir, as "path type size": a new file or dir anywhere shows up. */
export function snapshotFiles(tree: HostTree): string[] {
  const out: string[] = [];
  const walk = (dir: string) => {
    for (const name of readdirSync(dir)) {
      const path = join(dir, name);
      if (path === tree.state) continue;
      const st = lstatSync(path);
      out.push(`${relative(tree.root, path)} ${st.isSymbolicLink() ? "link" : st.isDirectory() ? "dir" : "file"} ${st.isFile() ? st.size : ""}`);
      if (st.isDirectory() && !st.isSymbolicLink()) walk(path);
    }
  };
  walk(tree.root);
  return out.sort();
}

export interface SpawnEvidence {
  jobRows: number;
  jobDirs: string[];
  processes: string[];
}

/** What a spawn would leave: a row in the real SQLite file, a job dir, a process naming the scratch tree. */
export function spawnEvidence(tree: HostTree, workerPid: number): SpawnEvidence {
  const db = join(tree.state, "jobs.db");
  const jobs = join(tree.state, "jobs");
  return {
    jobRows: existsSync(db) ? countJobs(db) : 0,
    jobDirs: existsSync(jobs) ? readdirSync(jobs) : [],
    processes: processesMentioning(tree.root).filter((p) => !p.startsWith(`${workerPid} `)),
  };
}

function countJobs(path: string): number {
  const db = new Database(path, { readonly: true });
  try {
    return db.query<{ n: number }, []>("SELECT count(*) AS n FROM jobs").get()!.n;
  } finally {
    db.close();
  }
}

/** Live processes whose command line holds `text`, as "pid cmdline". */
export function processesMentioning(text: string): string[] {
  return readdirSync("/proc").filter((d) => /^\d+$/.test(d)).flatMap((pid) => {
    try {
      const cmdline = readFileSync(`/proc/${pid}/cmdline`, "utf8").replaceAll("\0", " ");
      return cmdline.includes(text) ? [`${pid} ${cmdline.trim()}`] : [];
    } catch {
      return [];
    }
  });
}

/** Host paths in a message that the caller did not send itself. */
export function pathsNotSent(message: string, sent: string): string[] {
  return (message.match(/\/[^\s"',;()]+/g) ?? []).filter((p) => !sent.includes(p));
}
