import { Database } from "bun:sqlite";
import { describe, expect, test } from "bun:test";
import { isPaused, isResumable, type JobFilter, JobStatus, type SavedFacts, StopReason } from "../../src/job.ts";
import { FILTER_SQL } from "../../src/store/job-row.ts";
import { SCHEMA } from "../../src/store/schema.sql.ts";

// "Paused" and "resumable" are decided in job.ts; the list's filters and the partial indexes that count them say the
// same in SQL. Every combination of the facts they read, as rows of a real database, answered both ways.
const ROWS: SavedFacts[] = JobStatus.options.flatMap((status) =>
  [null, ...StopReason.options].flatMap((stop_reason) =>
    [null, "/state/step-40"].flatMap((resume_state) =>
      [null, "00000000-0000-4000-8000-000000000009"].map((resumed_by) => ({ status, stop_reason, resume_state, resumed_by })))));

const PREDICATES: Record<"paused" | "resumable", (job: SavedFacts) => boolean> = { paused: isPaused, resumable: isResumable };
// The partial index each filter is counted by (store/job-reads.ts).
const INDEX_OF: Record<keyof typeof PREDICATES, string> = { paused: "jobs_paused_now", resumable: "jobs_saved" };

function tableOfRows(): Database {
  const db = new Database(":memory:", { strict: true });
  db.run(SCHEMA);
  const insert = db.prepare(`INSERT INTO jobs (id, status, phase, created_at, request, request_hash, simulated, log_path,
    stop_reason, resume_state, resumed_by) VALUES ($id, $status, 'training', '2026-12-01T00:00:00Z', '{}', 'h', 1, '/l',
    $stop_reason, $resume_state, $resumed_by)`);
  ROWS.forEach((row, i) => insert.run({ id: String(i), ...row }));
  return db;
}

const idsWhere = (db: Database, where: string) =>
  db.query<{ id: string }, []>(`SELECT id FROM jobs WHERE ${where}`).all().map((r) => Number(r.id)).sort((a, b) => a - b);
const idsOf = (predicate: (job: SavedFacts) => boolean) => ROWS.flatMap((row, i) => (predicate(row) ? [i] : []));

// The condition a partial index was created with, as the database keeps it.
function indexCondition(db: Database, name: string): string {
  const sql = db.query<{ sql: string }, [string]>("SELECT sql FROM sqlite_master WHERE type = 'index' AND name = ?").get(name)?.sql;
  const where = sql?.split(/\bWHERE\b/)[1];
  if (where === undefined) throw new Error(`no partial index ${name} in the schema`);
  return where;
}

describe("the words for an ended job, in TypeScript and in SQL", () => {
  for (const filter of Object.keys(PREDICATES) as Array<keyof typeof PREDICATES>) {
    test(`FILTER_SQL.${filter} and the index ${INDEX_OF[filter]} keep exactly the rows ${PREDICATES[filter].name} keeps`, () => {
      using db = tableOfRows();
      const expected = idsOf(PREDICATES[filter]);
      expect(expected.length).toBeGreaterThan(0);
      expect(idsWhere(db, FILTER_SQL[filter as JobFilter]!)).toEqual(expected);
      expect(idsWhere(db, indexCondition(db, INDEX_OF[filter]))).toEqual(expected);
    });
  }

  test("contrast: the paused condition of before, blind to a resume, keeps rows isPaused does not", () => {
    using db = tableOfRows();
    const before = idsWhere(db, "status = 'cancelled' AND stop_reason = 'pause'");
    expect(before).not.toEqual(idsOf(isPaused));
    // The rows it adds are the resumed ones, exactly.
    const resumed = idsOf((row) => row.status === "cancelled" && row.stop_reason === "pause" && row.resumed_by !== null);
    expect(before.filter((id) => !idsOf(isPaused).includes(id))).toEqual(resumed);
  });
});
