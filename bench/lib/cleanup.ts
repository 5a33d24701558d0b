import { rmSync } from "node:fs";
import { killGroupAndLeader, pidsMentioning } from "./proc.ts";

// What an interrupted benchmark must not leave behind: its helper processes, and every process (the worker's
// detached shims and trainers among them) whose command line names one of its scratch dirs, and those dirs.
const helpers = new Set<number>();
const scratch = new Set<string>();

export function trackPid(pid: number): () => void {
  helpers.add(pid);
  return () => helpers.delete(pid);
}

export function trackScratch(root: string): () => void {
  scratch.add(root);
  return () => scratch.delete(root);
}

function cleanUpNow(): void {
  helpers.forEach(killGroupAndLeader);
  for (const root of scratch) {
    pidsMentioning(root).forEach(killGroupAndLeader);
    rmSync(root, { recursive: true, force: true });
  }
}

export function cleanUpOnSignals(): void {
  for (const [signal, code] of [["SIGINT", 130], ["SIGTERM", 143]] as const) {
    process.once(signal, () => {
      cleanUpNow();
      process.exit(code);
    });
  }
}
