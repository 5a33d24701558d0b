import { statfsSync } from "node:fs";
import type { JobStore, WriteFailure } from "./job-store.ts";

// Below this the state dir is full in all but name: the next train.log or WAL page would not fit.
export const STATE_MIN_FREE_BYTES = 1024 * 1024;

export interface StateHealth {
  /** Null while the state dir takes writes; otherwise why not, and since when. */
  failure(): WriteFailure | null;
  /** The state dir's own free space is below the minimum (a write would fail): checked before a claim. */
  full(): WriteFailure | null;
}

// Two kinds of evidence: a write the database refused, and the free space of the state dir's file system (an
// idle worker writes nothing, so only the second can tell that the disk filled while nothing ran).
export function createStateHealth(store: JobStore, dir: string, now: () => Date): StateHealth {
  let fullSince: string | null = null;
  const full = (): WriteFailure | null => {
    const free = freeBytes(dir);
    if (free === null || free >= STATE_MIN_FREE_BYTES) return (fullSince = null);
    fullSince ??= now().toISOString();
    return { error: `the state dir's disk is full: ${free} bytes free at ${dir}, below ${STATE_MIN_FREE_BYTES}`, since: fullSince };
  };
  return { failure: () => store.writeFailure() ?? full(), full };
}

function freeBytes(dir: string): number | null {
  try {
    const fs = statfsSync(dir);
    return fs.bavail * fs.bsize;
  } catch {
    return null;
  }
}
