import type { Database } from "bun:sqlite";
import type { JobFilter, LossPoint } from "../job.ts";
import { ACTIVE_SQL, FILTER_SQL, type Job, type JobRow, toJob } from "./job-row.ts";

// Enough for every job a status page or a client follows at once; past it the cache starts again.
const CACHED_ROWS = 256;

// Where a page of the job list goes on from: the last job of the page before.
interface PageAfter {
  createdAt: string;
  id: string;
}

// An ended job retention may remove the directory of, with what ties its state to other jobs.
type PrunableJob = Pick<JobRow, "id" | "resume_state" | "resumed_by">;

/**
 * The store's reads over its database: one job (cached until a write, which calls `forget`), pages, counts, the
 * active jobs, a loss history.
 */
export function createJobReads(db: Database) {
  const byId = db.prepare<JobRow, [string]>("SELECT * FROM jobs WHERE id = ?");
  // One output, one run: an active job that will publish to the same file.
  const outputUser = db.prepare<{ id: string }, [string]>(
    `SELECT id FROM jobs WHERE output_file = ? AND ${ACTIVE_SQL} LIMIT 1`,
  );
  const activeId = db.prepare<{ id: string }, []>(`SELECT id FROM jobs WHERE ${ACTIVE_SQL} LIMIT 1`);
  const statusOf = db.prepare<{ status: string }, [string]>("SELECT status FROM jobs WHERE id = ?");
  // Each answered from its partial index (schema.sql.ts), whatever the length of the history.
  const countOf = (index: string, filter: string | undefined) =>
    db.prepare<{ n: number }, []>(`SELECT count(*) AS n FROM jobs INDEXED BY ${index} WHERE ${filter}`);
  const countPaused = countOf("jobs_paused_now", FILTER_SQL.paused);
  const countResumable = countOf("jobs_saved", FILTER_SQL.resumable);
  // Rows as last read, for the answers that read one job many times a second: any write empties it, so a row here
  // is always what the database holds. Frozen, since every reader shares it.
  const rows = new Map<string, Job>();

  return {
    get(id: string): Job | null {
      const known = rows.get(id);
      if (known) return known;
      const row = byId.get(id);
      if (row === null) return null;
      if (rows.size >= CACHED_ROWS) rows.clear();
      const job = toJob(row);
      rows.set(id, job);
      return job;
    },
    /** A write happened: no row read before it is known to be current. */
    forget(): void {
      rows.clear();
    },
    list: (filter: JobFilter | null, limit: number, after: PageAfter | null) => listJobs(db, filter, limit, after),
    /** The ended jobs a person looks for: paused ones, and those a resume can still continue. */
    countSaved(): { paused: number; resumable: number } {
      return { paused: countPaused.get()!.n, resumable: countResumable.get()!.n };
    },
    byIdempotencyKey: (key: string) => jobByIdempotencyKey(db, key),
    prunable: (endedBefore: string, keepLast: number) => prunableJobs(db, endedBefore, keepLast),
    /** Whether retention marked the job: its directory goes (or went). */
    isPruned(id: string): boolean {
      return (byId.get(id)?.pruned_at ?? null) !== null;
    },
    /** An active job that publishes to `outputFile`, if one does. */
    outputUser(outputFile: string): string | null {
      return outputUser.get(outputFile)?.id ?? null;
    },
    /** One active job, if any: who holds the slot. */
    activeId(): string | null {
      return activeId.get()?.id ?? null;
    },
    /** The status on record: what a transition moves the tallies from. */
    statusOf(id: string): string | null {
      return statusOf.get(id)?.status ?? null;
    },
    activeJobs: () => activeJobs(db),
    lossHistory: (id: string) => lossHistory(db, id),
  };
}

// Newest first, keyset-paged on (created_at, id) so a page never shifts under inserts.
function listJobs(db: Database, filter: JobFilter | null, limit: number, after: PageAfter | null): Job[] {
  const status = filter === null || filter in FILTER_SQL ? null : filter;
  const where = [
    filter === null ? "1" : (FILTER_SQL[filter] ?? "status = $status"),
    after === null ? "1" : "(created_at, id) < ($created_at, $id)",
  ].join(" AND ");
  return db
    .query<JobRow, Record<string, string | number>>(
      `SELECT * FROM jobs WHERE ${where} ORDER BY created_at DESC, id DESC LIMIT $limit`,
    )
    .all({
      limit,
      ...(status === null ? {} : { status }),
      ...(after === null ? {} : { created_at: after.createdAt, id: after.id }),
    })
    .map(toJob);
}

// The job a POST with this Idempotency-Key claimed, if one did.
function jobByIdempotencyKey(db: Database, key: string): Job | null {
  const row = db.query<JobRow, [string]>("SELECT * FROM jobs WHERE idempotency_key = ?").get(key);
  return row === null ? null : toJob(row);
}

// Ended before `endedBefore` and not among the newest `keepLast` jobs: their directories may go; records stay.
function prunableJobs(db: Database, endedBefore: string, keepLast: number): PrunableJob[] {
  return db
    .query<PrunableJob, [string, number]>(
      `SELECT id, resume_state, resumed_by FROM jobs
       WHERE NOT (${ACTIVE_SQL}) AND pruned_at IS NULL AND ended_at < ?
       AND id NOT IN (SELECT id FROM jobs ORDER BY created_at DESC, id DESC LIMIT ?)`,
    )
    .all(endedBefore, keepLast);
}

// Every active job.
function activeJobs(db: Database): Job[] {
  return db.query<JobRow, []>(`SELECT * FROM jobs WHERE ${ACTIVE_SQL}`).all().map(toJob);
}

// A job's recorded loss points, by step.
function lossHistory(db: Database, id: string): LossPoint[] {
  return db
    .query<{ step: number; loss: number | null }, [string]>(
      "SELECT step, loss FROM loss_points WHERE job_id = ? ORDER BY step",
    )
    .all(id)
    .map((r) => [r.step, r.loss]);
}
