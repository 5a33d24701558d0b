import type { Database } from "bun:sqlite";

/** Jobs per status and failed jobs per error_code, kept at every transition so /metrics never scans the history. */
export interface JobTallies {
  byStatus(): Record<string, number>;
  failuresByCode(): Record<string, number>;
  /** Ended runs per likeness verdict. */
  verdicts(): Record<string, number>;
  /** A job left `from` (null: a new job) for `to`. */
  moved(from: string | null, to: string): void;
  failed(code: string): void;
  judged(verdict: string): void;
}

interface Counts {
  statuses: Map<string, number>;
  failures: Map<string, number>;
  verdicts: Map<string, number>;
}

// Counted once, at the first read (the first /metrics), not at open: start-up stays the same whatever the history.
// Until then a transition has nothing to change: the count, when it comes, sees it in the table.
export function createJobTallies(db: Database): JobTallies {
  let counts: Counts | null = null;
  const loaded = () => (counts ??= countAll(db));
  const add = (map: Map<string, number>, key: string, by: number) => map.set(key, (map.get(key) ?? 0) + by);
  return {
    byStatus: () => Object.fromEntries(loaded().statuses),
    failuresByCode: () => Object.fromEntries(loaded().failures),
    verdicts: () => Object.fromEntries(loaded().verdicts),
    moved(from, to) {
      if (counts === null) return;
      if (from !== null) add(counts.statuses, from, -1);
      add(counts.statuses, to, 1);
    },
    failed(code) {
      if (counts !== null) add(counts.failures, code, 1);
    },
    judged(verdict) {
      if (counts !== null) add(counts.verdicts, verdict, 1);
    },
  };
}

function countAll(db: Database): Counts {
  const statuses = db.query<{ status: string; n: number }, []>("SELECT status, count(*) AS n FROM jobs GROUP BY status")
    .all();
  const failures = db.query<{ code: string; n: number }, []>(
    "SELECT error_code AS code, count(*) AS n FROM jobs WHERE status = 'failed' AND error_code IS NOT NULL " +
      "GROUP BY error_code",
  ).all();
  const verdicts = db.query<{ verdict: string; n: number }, []>(
    "SELECT likeness ->> '$.verdict' AS verdict, count(*) AS n FROM jobs WHERE likeness ->> '$.verdict' IS NOT NULL " +
      "GROUP BY verdict",
  ).all();
  return {
    statuses: new Map(statuses.map((r) => [r.status, r.n])),
    failures: new Map(failures.map((r) => [r.code, r.n])),
    verdicts: new Map(verdicts.map((r) => [r.verdict, r.n])),
  };
}
