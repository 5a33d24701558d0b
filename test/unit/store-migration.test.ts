import { Database } from "bun:sqlite";
import { describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { openJobStore } from "../../src/store/job-store.ts";
import { SCHEMA } from "../../src/store/schema.sql.ts";

// Columns later releases added; a database from before them must open, gain them and work.
const LATER_COLUMNS = [
  "stop_requested_at", "dataset_files", "dataset_bytes", "dataset_sha256", "pruned_at", "output_file", "resume_step", "resume_state",
  "resume_gone", "checkpoints", "resumed_from", "resumed_from_step", "resumed_by", "pause_requested_at", "samples",
  "slurm_job_id", "resume_digest", "base_model_print", "likeness",
];

function firstReleaseSchema(): string {
  // The indexes of later releases go too (whole statements, some span lines): the first release had only jobs_created.
  const indexes = SCHEMA.replace(/CREATE INDEX IF NOT EXISTS (?!jobs_created)\w+[^;]*;/g, "");
  const kept = indexes.split("\n").filter((line) => !LATER_COLUMNS.some((c) => line.trim().startsWith(`${c} `)));
  return kept.filter((line) => !line.startsWith("--")).join("\n");
}

describe("the job database across releases", () => {
  test("a first-release database opens, gains every later column and index, keeps its rows and takes new ones", () => {
    const dir = mkdtempSync(join(tmpdir(), "lora-worker-migrate-"));
    try {
      const path = join(dir, "jobs.db");
      const old = new Database(path);
      old.run(firstReleaseSchema());
      // The index of the releases whose runs shared one folder of states (on output_file then; its name is what counts).
      old.run("CREATE INDEX jobs_resumable ON jobs (created_at)");
      // The paused jobs' index of the releases that counted a resumed paused job as paused still.
      old.run("CREATE INDEX jobs_paused ON jobs (created_at, id) WHERE status = 'cancelled' AND stop_reason = 'pause'");
      old.run(`INSERT INTO jobs (id, status, phase, created_at, request, request_hash, simulated, log_path)
               VALUES ('old', 'failed', 'training', '2026-01-01T00:00:00Z', '{}', 'h', 1, '/x')`);
      expect(old.query("PRAGMA table_info(jobs)").all().length).toBeLessThan(40);
      old.close();

      const store = openJobStore(path);
      expect(store.get("old")).toMatchObject({ status: "failed", resume_step: null, resumed_by: null, checkpoints: [] });
      const claim = store.insertIfIdle({
        id: "new", request: {}, requestHash: "n", idempotencyKey: null, admissionWarning: null, simulated: true, logPath: "/y",
        now: "2026-11-30T00:00:00Z", totalSteps: 400, dataset: null, phase: "preparing", outputFile: "/out/l.safetensors",
      });
      expect(claim).toEqual({ ok: true, value: undefined });
      // The likeness column an old record lacks: null for it, written and read back for a new one, and counted.
      expect(store.get("old")!.likeness).toBeNull();
      const likeness = { threshold: 0.6, points: [], verdict: "undertrained" as const, reason: null, best_step: null, best_sha256: null };
      expect(store.saveLikeness("new", likeness)).toBe(true);
      expect(store.get("new")!.likeness).toEqual(likeness);
      expect(store.countVerdicts()).toEqual({ undertrained: 1 });
      store.close();
      const db = new Database(path, { readonly: true });
      const indexes = db.query<{ name: string }, []>("SELECT name FROM sqlite_master WHERE type = 'index' AND name LIKE 'jobs_%'").all().map((r) => r.name);
      // The index runs of one output once shared, and the paused index blind to resumes, are gone from it too.
      expect(indexes.sort()).toEqual(["jobs_created", "jobs_paused_now", "jobs_saved", "jobs_status"]);
      db.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
