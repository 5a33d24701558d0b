import type { Database, SQLQueryBindings } from "bun:sqlite";
import type {
  DatasetReport, Likeness, LossPoint, Outcome, Phase, ProgressFields, ResumePoint, Sample, StopReason,
} from "../job.ts";
import type { ProcessIdentity } from "../os/proc.ts";
import type { BaseModelPrint } from "../request/base-model.ts";
import { fail, ok, type Result } from "../result.ts";
import { createJobReads } from "./job-reads.ts";
import { ACTIVE_SQL } from "./job-row.ts";
import { createJobTallies } from "./job-tallies.ts";
import { bindRecord, type JobRecord } from "./job-record.ts";
import { openChecked, type OpenOptions } from "./open.ts";

export type { Job } from "./job-row.ts";
export type { JobRecord } from "./job-record.ts";

const reportJson = (dataset: DatasetOnRecord | null) =>
  dataset?.report == null ? null : JSON.stringify(dataset.report);

/** What a job directory's dataset copy holds, and what preparing it did (absent for a job recorded again). */
export interface DatasetOnRecord {
  files: number;
  bytes: number;
  sha256: string;
  report?: DatasetReport | null;
}

interface NewJob {
  id: string;
  request: unknown;
  requestHash: string;
  idempotencyKey: string | null;
  admissionWarning: string | null;
  simulated: boolean;
  logPath: string;
  now: string;
  // `preparing` for a claim (its dataset is copied next), the phase its files show for a job recorded again.
  phase: Phase;
  // The run's step count, known before the trainer says it (the tier's); null for a replayed recording.
  totalSteps: number | null;
  /** What the job directory's copy of the dataset holds: null until the copy is done, and for a job recorded again
   * after its database was lost. */
  dataset: DatasetOnRecord | null;
  outputFile?: string | null;
  // A resume: the job it continues and the state it starts from (its step is where progress starts).
  resumes?: { id: string; step: number; state: string; digest: string | null } | null;
  // What the base model was at dispatch (size, mtime, header digest): a resume refuses a replaced one.
  baseModelPrint?: BaseModelPrint | null;
  // The preview images the job starts with (a resume's predecessor's).
  samples?: Sample[] | null;
  // How many jobs may be active at once: 1 on this host, slurm.max_active_jobs on the Slurm backend.
  maxActive?: number;
}

// The slot; or who holds it, who runs for the same output, or who resumed the same state first.
type Claim = Result<void, { activeId: string } | { outputUser: string } | { resumedBy: string | null }>;

export type JobStore = ReturnType<typeof openJobStore>;

// A write the state dir could not take (SQLITE_FULL, I/O error, read-only): the caller keeps what it meant
// to write and tries again; the store remembers the failure until a write succeeds.
export class StoreWriteFailed extends Error {}

export interface WriteFailure {
  error: string;
  since: string;
}

// The transitions of one UPDATE each, guarded by the states they may leave.
const SQL = {
  saveResumePoint:
    "UPDATE jobs SET resume_step=?, resume_state=?, resume_digest=?, checkpoints=?, resume_gone=? WHERE id=?",
  dropResume: "UPDATE jobs SET resume_step=NULL, resume_state=NULL, resume_gone=? WHERE id=?",
  markPrepared: `UPDATE jobs SET phase='loading', dataset_files=COALESCE(?, dataset_files),
      dataset_bytes=COALESCE(?, dataset_bytes), dataset_sha256=COALESCE(?, dataset_sha256),
      dataset_report=COALESCE(?, dataset_report)
    WHERE id=? AND ${ACTIVE_SQL}`,
  saveSamples: "UPDATE jobs SET samples=? WHERE id=?",
  saveLikeness: "UPDATE jobs SET likeness=? WHERE id=?",
  requestPause: `UPDATE jobs SET pause_requested_at=COALESCE(pause_requested_at, ?) WHERE id=? AND ${ACTIVE_SQL}`,
  markSpawned: `UPDATE jobs SET pid=?, pid_start_ticks=?, boot_id=?, started_at=?
    WHERE id=? AND status='starting' AND pid IS NULL`,
  markShim: `UPDATE jobs SET shim_pid=?, shim_start_ticks=?, boot_id=?
    WHERE id=? AND shim_pid IS NULL AND ${ACTIVE_SQL}`,
  markSlurm: `UPDATE jobs SET slurm_job_id=? WHERE id=? AND ${ACTIVE_SQL}`,
  markStarted: `UPDATE jobs SET started_at=COALESCE(started_at, ?) WHERE id=? AND ${ACTIVE_SQL}`,
  markTraining: "UPDATE jobs SET status='training' WHERE id=? AND status='starting'",
  requestStop: `UPDATE jobs SET stop_reason=COALESCE(stop_reason, ?), stop_requested_at=COALESCE(stop_requested_at, ?),
      cancel_requested_at=COALESCE(cancel_requested_at, ?)
    WHERE id=? AND ${ACTIVE_SQL}`,
};

// Every transition is an UPDATE guarded by the states it may leave; `changes` says if it happened. The reads are
// job-reads.ts's.
export function openJobStore(path: string, options: OpenOptions = { integrityCheck: true }) {
  const db = openChecked(path, options);
  const tallies = createJobTallies(db);
  const bump = (from: string | null, to: string) => tallies.moved(from, to);
  const { forget, activeId, statusOf, ...reads } = createJobReads(db);
  let failure: WriteFailure | null = null;
  const write = <T>(fn: () => T): T => {
    try {
      const result = fn();
      failure = null;
      return result;
    } catch (err) {
      const error = (err as Error).message;
      failure ??= { error, since: new Date().toISOString() };
      throw new StoreWriteFailed(`the job database could not be written: ${error}`);
    } finally {
      forget();
    }
  };
  const claimSlot = prepareClaim(db, reads.outputUser, activeId);
  const insertIdle = (job: NewJob): Claim => {
    const claim = claimSlot(job);
    if (claim.ok) bump(null, "starting");
    return claim;
  };
  const prune = preparePrune(db);
  const finishTx = prepareFinish(db);
  const progress = prepareProgress(db);

  // One guarded UPDATE: whether it moved the job.
  const update = (sql: string, values: SQLQueryBindings[]) => write(() => changed(db.run(sql, values)));

  const store = {
    ...reads,
    countByStatus: tallies.byStatus,
    countFailuresByCode: tallies.failuresByCode,
    countVerdicts: tallies.verdicts,
    /** Null while writes succeed; otherwise the first failure since the last write that worked. */
    writeFailure(): WriteFailure | null {
      return failure;
    },
    insertIfIdle(job: NewJob): Claim {
      return write(() => insertIdle(job));
    },
    // A job alive in its directory but missing from the database: recorded again, as it began.
    insertRecovered(job: NewJob): boolean {
      return write(() => insertIdle(job).ok);
    },
    // What a run's saved states allow now; written at each verified checkpoint and at the end.
    saveResumePoint: (id: string, point: ResumePoint) =>
      update(SQL.saveResumePoint, [
        point.step, point.state, point.digest, JSON.stringify(point.checkpoints), point.gone, id,
      ]),
    /** The state is gone (pruned, removed): the job is no longer resumable, and the record says why. */
    dropResume: (id: string, why: string) => update(SQL.dropResume, [why, id]),
    // The job directory is filled: what its dataset copy holds goes on record (a resume's was known at its claim),
    // and the job moves on to its launch.
    markPrepared: (id: string, dataset: DatasetOnRecord | null) =>
      update(SQL.markPrepared, [
        dataset?.files ?? null, dataset?.bytes ?? null, dataset?.sha256 ?? null, reportJson(dataset), id,
      ]),
    saveSamples: (id: string, samples: Sample[]) => update(SQL.saveSamples, [JSON.stringify(samples), id]),
    saveLikeness(id: string, likeness: Likeness): boolean {
      const moved = update(SQL.saveLikeness, [JSON.stringify(likeness), id]);
      if (moved && likeness.verdict !== null) tallies.judged(likeness.verdict);
      return moved;
    },
    requestPause: (id: string, now: string) => update(SQL.requestPause, [now, id]),
    // One commit for a whole batch: a backlog of thousands is not thousands of fsyncs. Returns the jobs marked:
    // their directories may go now.
    markPruned(jobs: ReadonlyArray<{ id: string; dir: string }>, now: string): string[] {
      return jobs.length > 0 ? write(() => prune.markPruned.immediate(jobs, now)) : [];
    },
    /** `state` is replaced by `by`'s newer one: the jobs it came from no longer offer it. */
    releaseState(state: string, by: string, why: string): boolean {
      return write(() => prune.releaseState.run(why, state, by).changes > 0);
    },
    markSpawned: (id: string, identity: ProcessIdentity, now: string) =>
      update(SQL.markSpawned, [identity.pid, identity.startTicks, identity.bootId, now, id]),
    markShim: (id: string, identity: ProcessIdentity) =>
      update(SQL.markShim, [identity.pid, identity.startTicks, identity.bootId, id]),
    markSlurm: (id: string, jobId: string) => update(SQL.markSlurm, [jobId, id]),
    // A run placed by a scheduler has no trainer identity of this host to record: it started when it began to run.
    markStarted: (id: string, now: string) => update(SQL.markStarted, [now, id]),
    markTraining(id: string): boolean {
      const moved = update(SQL.markTraining, [id]);
      if (moved) bump("starting", "training");
      return moved;
    },
    saveProgress(id: string, p: ProgressFields): boolean {
      return write(() => changed(progress.save(id, p)));
    },
    // A running job's periodic progress, in one unsynced commit: one lost to a power cut is rewritten by the next.
    saveProgressUnsynced(id: string, p: ProgressFields, points: LossPoint[]): boolean {
      return write(() => progress.unsynced(() => changed(progress.saveWithPoints.immediate(id, p, points))));
    },
    appendLoss(id: string, points: LossPoint[]): void {
      if (points.length > 0) write(() => progress.appendPoints.immediate(id, points));
    },
    // The first reason wins: a cancel after a watchdog fired does not rewrite why the run stopped, nor when.
    requestStop: (id: string, reason: StopReason, now: string) =>
      update(SQL.requestStop, [reason, now, reason === "cancel" ? now : null, id]),
    // The job's one final record; a resume that never started a trainer hands its chain back in the same commit.
    finish(id: string, o: Outcome, now: string): boolean {
      const from = statusOf(id);
      const ended = write(() => finishTx.immediate(id, o, now));
      if (ended && from !== null) bump(from, o.status);
      if (ended && o.status === "failed" && o.error_code !== null) tallies.failed(o.error_code);
      return ended;
    },
    close(): void {
      db.close();
    },
  };
  return { ...store, record: (id: string): JobRecord => bindRecord(store, id) };
}

// The claim: exactly one caller wins; the others learn who holds the slot or the output (or, for a resume, who
// resumed it first).
function prepareClaim(db: Database, outputUser: (file: string) => string | null, activeId: () => string | null) {
  const insert = db.prepare(
    `INSERT INTO jobs (id, status, phase, step, total_steps, created_at, request, request_hash, idempotency_key,
       admission_warning, simulated, log_path, dataset_files, dataset_bytes, dataset_sha256, dataset_report,
       output_file, resumed_from, resumed_from_step, resume_step, resume_state, resume_digest, samples,
       base_model_print)
     SELECT $id, 'starting', $phase, $step, $total_steps, $now, $request, $request_hash, $idempotency_key,
       $admission_warning, $simulated, $log_path, $dataset_files, $dataset_bytes, $dataset_sha256, $dataset_report,
       $output_file, $resumed_from, $resume_step, $resume_step, $resume_state, $resume_digest, $samples,
       $base_model_print
     WHERE (SELECT count(*) FROM jobs WHERE ${ACTIVE_SQL}) < $max_active`,
  );
  // A resume takes its predecessor once: the first to link wins.
  // A predecessor retention has marked is being removed: it cannot be resumed.
  const linkResume = db.prepare("UPDATE jobs SET resumed_by=? WHERE id=? AND resumed_by IS NULL AND pruned_at IS NULL");
  const resumedBy = db.prepare<{ resumed_by: string | null }, [string]>("SELECT resumed_by FROM jobs WHERE id = ?");
  const tx = db.transaction((job: NewJob): Claim => {
    const resumes = job.resumes ?? null;
    const user = job.outputFile == null ? null : outputUser(job.outputFile);
    if (user !== null) return fail({ outputUser: user });
    const res = insert.run({
      id: job.id, now: job.now, phase: job.phase, total_steps: job.totalSteps, request: JSON.stringify(job.request),
      request_hash: job.requestHash,
      dataset_files: job.dataset?.files ?? null, dataset_bytes: job.dataset?.bytes ?? null,
      dataset_sha256: job.dataset?.sha256 ?? null, dataset_report: reportJson(job.dataset),
      idempotency_key: job.idempotencyKey, admission_warning: job.admissionWarning, simulated: job.simulated ? 1 : 0,
      log_path: job.logPath,
      step: resumes?.step ?? 0, output_file: job.outputFile ?? null, resumed_from: resumes?.id ?? null,
      resume_step: resumes?.step ?? null, resume_state: resumes?.state ?? null,
      resume_digest: resumes?.digest ?? null, samples: job.samples == null ? null : JSON.stringify(job.samples),
      base_model_print: job.baseModelPrint == null ? null : JSON.stringify(job.baseModelPrint),
      max_active: job.maxActive ?? 1,
    });
    if (res.changes !== 1) return fail({ activeId: activeId() ?? "unknown" });
    if (resumes && linkResume.run(job.id, resumes.id).changes !== 1) {
      throw new ResumeTaken(resumedBy.get(resumes.id)?.resumed_by ?? null);
    }
    return ok(undefined);
  });
  return (job: NewJob): Claim => {
    try {
      return tx.immediate(job);
    } catch (err) {
      if (err instanceof ResumeTaken) return fail({ resumedBy: err.by });
      throw err;
    }
  };
}

// Retention's marks, and a state a successor replaced.
function preparePrune(db: Database) {
  // The mark comes before the removal (a kill in between leaves a marked job, never a half-removed resumable one),
  // and never lands on a directory holding the state another job's record would resume from.
  const markPrunedOne = db.prepare(
    `UPDATE jobs SET pruned_at=$now, checkpoints=NULL,
       resume_gone=CASE WHEN resume_state IS NULL THEN resume_gone ELSE $why END, resume_step=NULL, resume_state=NULL,
       resume_digest=NULL
     WHERE id=$id AND pruned_at IS NULL AND NOT (${ACTIVE_SQL})
       AND NOT EXISTS (SELECT 1 FROM jobs o WHERE o.id != $id AND o.resume_state LIKE $dir || '/%')`,
  );
  return {
    markPruned: db.transaction((jobs: ReadonlyArray<{ id: string; dir: string }>, now: string) => {
      const why = "its saved state was pruned by retention with its job directory";
      return jobs.filter(({ id, dir }) => markPrunedOne.run({ now, why, id, dir }).changes === 1).map((j) => j.id);
    }),
    // A successor's own newer state replaces the predecessor's it started from.
    releaseState: db.prepare(
      `UPDATE jobs SET resume_step=NULL, resume_state=NULL, resume_digest=NULL, resume_gone=?
       WHERE resume_state=? AND id!=?`,
    ),
  };
}

// The end of a job, and the chain handed back in the same commit.
function prepareFinish(db: Database) {
  const endJob = db.prepare(
    `UPDATE jobs SET status=?, exit_code=?, signal=?, forced_kill=?, error=?, error_code=?,
       lora_path=?, lora_sha256=?, lora_bytes=?, ended_at=?, eta_s=NULL
     WHERE id=? AND ${ACTIVE_SQL}`,
  );
  const handBack = prepareHandBack(db);
  return db.transaction((id: string, o: Outcome, now: string): boolean => {
    const values = [
      o.status, o.exit_code, o.signal, o.forced_kill ? 1 : 0, o.error, o.error_code,
      o.lora_path, o.lora_sha256, o.lora_bytes, now, id,
    ];
    if (!changed(endJob.run(...values))) return false;
    handBack(id);
    return true;
  });
}

// A resume that ended before its trainer started took nothing from its predecessor: the chain goes back to it, and
// the resume no longer offers the state it never trained from (nor its dataset copy, which it does not keep).
function prepareHandBack(db: Database) {
  const untrainedResume = db.prepare<{ from_id: string; step: number }, [string]>(
    `SELECT s.resumed_from AS from_id, s.resume_step AS step FROM jobs s JOIN jobs p ON p.id = s.resumed_from
     WHERE s.id = ? AND s.started_at IS NULL AND p.resumed_by = s.id AND s.resume_state = p.resume_state`,
  );
  const unlinkResume = db.prepare("UPDATE jobs SET resumed_by=NULL WHERE id=? AND resumed_by=?");
  return (id: string) => {
    const chain = untrainedResume.get(id);
    if (chain === null) return;
    unlinkResume.run(chain.from_id, id);
    const why = `it ended before its trainer started and took nothing from job ${chain.from_id}: ` +
      `resume job ${chain.from_id} instead (its saved state at step ${chain.step})`;
    db.run("UPDATE jobs SET resume_step=NULL, resume_state=NULL, resume_digest=NULL, resume_gone=? WHERE id=?", [
      why, id,
    ]);
  };
}

// Progress and loss points: the UPDATE alone, with its points in one commit, or points alone.
function prepareProgress(db: Database) {
  const insertPoint = db.prepare("INSERT OR REPLACE INTO loss_points (job_id, step, loss) VALUES (?, ?, ?)");
  const updateProgress = db.prepare(
    `UPDATE jobs SET phase=?, step=?, total_steps=?, loss=?, eta_s=? WHERE id=? AND ${ACTIVE_SQL}`,
  );
  const save = (id: string, p: ProgressFields) =>
    updateProgress.run(p.phase, p.step, p.total_steps, p.loss, p.eta_s, id);
  // In WAL mode a commit at NORMAL is not fsynced: a power loss may roll it back (never corrupt), and the next
  // commit at FULL syncs the log it follows. The setting is per connection and must change outside a transaction.
  const [normal, full] = [db.prepare("PRAGMA synchronous = NORMAL"), db.prepare("PRAGMA synchronous = FULL")];
  return {
    save,
    saveWithPoints: db.transaction((id: string, p: ProgressFields, points: LossPoint[]) => {
      const res = save(id, p);
      for (const [step, loss] of points) insertPoint.run(id, step, loss);
      return res;
    }),
    appendPoints: db.transaction((id: string, points: LossPoint[]) => {
      for (const [step, loss] of points) insertPoint.run(id, step, loss);
    }),
    unsynced<T>(fn: () => T): T {
      normal.run();
      try {
        return fn();
      } finally {
        full.run();
      }
    },
  };
}

// Null: nobody resumed it, retention marked it meanwhile.
class ResumeTaken extends Error {
  constructor(readonly by: string | null) {
    super(by === null ? "pruned by retention" : `already resumed by ${by}`);
  }
}

function changed(res: { changes: number }): boolean {
  return res.changes === 1;
}
