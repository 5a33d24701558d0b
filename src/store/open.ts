import { Database } from "bun:sqlite";
import { SCHEMA } from "./schema.sql.ts";

/** The job database is damaged: the worker refuses to start rather than serve from it. */
export class StoreUnusable extends Error {}

export interface OpenOptions {
  /** Run PRAGMA quick_check, whose cost grows with the history: after a shutdown that was not clean. */
  integrityCheck: boolean;
}

// Refuses a damaged database instead of serving from it; WAL with synchronous=FULL survives power loss (only a
// running job's periodic progress is committed at NORMAL). A file that is no database at all fails the first
// statement whether or not the integrity check runs.
export function openChecked(path: string, options: OpenOptions): Database {
  const db = new Database(path, { create: true, strict: true });
  try {
    db.run("PRAGMA busy_timeout = 5000");
    const check = options.integrityCheck
      ? db.query<{ quick_check: string }, []>("PRAGMA quick_check").all().map((r) => r.quick_check)
      : ["ok"];
    if (check.join() !== "ok") throw new Error(check.slice(0, 3).join("; "));
    db.run("PRAGMA journal_mode = WAL");
    db.run("PRAGMA synchronous = FULL");
    migrate(db);
    db.run(SCHEMA);
    return db;
  } catch (err) {
    db.close();
    throw new StoreUnusable(
      `the job database ${path} is damaged (${(err as Error).message}); move it aside to start with an empty one`,
    );
  }
}

// Columns added after the first release; CREATE TABLE IF NOT EXISTS leaves an older table as it was.
const ADDED_COLUMNS: Array<[name: string, type: string]> = [
  ["stop_requested_at", "TEXT"],
  ["dataset_files", "INTEGER"],
  ["dataset_bytes", "INTEGER"],
  ["dataset_sha256", "TEXT"],
  ["pruned_at", "TEXT"],
  ["output_file", "TEXT"],
  ["resume_step", "INTEGER"],
  ["resume_state", "TEXT"],
  ["resume_digest", "TEXT"],
  ["resume_gone", "TEXT"],
  ["checkpoints", "TEXT"],
  ["resumed_from", "TEXT"],
  ["resumed_from_step", "INTEGER"],
  ["resumed_by", "TEXT"],
  ["base_model_print", "TEXT"],
  ["pause_requested_at", "TEXT"],
  ["samples", "TEXT"],
  ["slurm_job_id", "TEXT"],
  ["dataset_report", "TEXT"],
  ["likeness", "TEXT"],
];

// Before the schema's indexes, which may name an added column. A new database has no table yet: the schema makes it.
function migrate(db: Database): void {
  const have = new Set(db.query<{ name: string }, []>("PRAGMA table_info(jobs)").all().map((c) => c.name));
  if (have.size === 0) return;
  for (const [name, type] of ADDED_COLUMNS) if (!have.has(name)) db.run(`ALTER TABLE jobs ADD COLUMN ${name} ${type}`);
  // Runs of one output shared their states' folder once, and a new run superseded the old states by this index.
  db.run("DROP INDEX IF EXISTS jobs_resumable");
  // It held resumed paused jobs too: jobs_paused_now holds only those not resumed yet.
  db.run("DROP INDEX IF EXISTS jobs_paused");
}
