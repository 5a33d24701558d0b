import {
  ACTIVE_STATUSES, type Checkpoint, type ErrorCode, type JobFilter, type JobStatus, type LossPoint, type Outcome,
  type Phase, type ResumePoint, type Sample, type StopReason, type DatasetReport,
} from "../job.ts";
import type { ProcessIdentity } from "../os/proc.ts";
import type { BaseModelPrint } from "../request/base-model.ts";
import type { JobRequest } from "../request/schema.ts";
import { fail, ok, type Result } from "../result.ts";
import { createJobTallies } from "./job-tallies.ts";
import { openChecked, type OpenOptions } from "./open.ts";

// A job as the database holds it: JSON in text columns, booleans as 0/1. Decoded once, into a Job, as it is read.
interface JobRow {
  id: string;
  status: JobStatus;
  phase: Phase;
  step: number;
  total_steps: number | null;
  loss: number | null;
  eta_s: number | null;
  lora_path: string | null;
  lora_sha256: string | null;
  lora_bytes: number | null;
  error: string | null;
  error_code: ErrorCode | null;
  created_at: string;
  started_at: string | null;
  ended_at: string | null;
  request: string;
  request_hash: string;
  idempotency_key: string | null;
  simulated: number;
  admission_warning: string | null;
  pid: number | null;
  pid_start_ticks: number | null;
  boot_id: string | null;
  exit_code: number | null;
  signal: string | null;
  shim_pid: number | null;
  shim_start_ticks: number | null;
  forced_kill: number;
  cancel_requested_at: string | null;
  stop_reason: StopReason | null;
  stop_requested_at: string | null;
  dataset_files: number | null;
  dataset_bytes: number | null;
  dataset_sha256: string | null;
  /** JSON of DatasetReport: what the worker did to the copy and found in it; null until it is prepared. */
  dataset_report: string | null;
  pruned_at: string | null;
  /** The final LoRA's resolved path; null for a job recorded before checkpoints existed. */
  output_file: string | null;
  /** The newest complete saved state a resume would start from (its step and directory), or null. */
  resume_step: number | null;
  resume_state: string | null;
  resume_digest: string | null;
  /** Why a state this job once had is gone (removed after success, pruned, replaced by a successor's). */
  resume_gone: string | null;
  /** JSON array of Checkpoint: the verified intermediate LoRAs still on disk. */
  checkpoints: string | null;
  resumed_from: string | null;
  /** The step of the state a resumed job started from. */
  resumed_from_step: number | null;
  resumed_by: string | null;
  pause_requested_at: string | null;
  /** JSON array of Sample: the preview images of the run (and of the runs it resumed), as found on disk. */
  samples: string | null;
  /** What the base model was at dispatch (JSON: size, mtime, header digest). */
  base_model_print: string | null;
  /** The run's Slurm batch job, on the Slurm backend. */
  slurm_job_id: string | null;
  log_path: string;
}

/** A job on record, as every reader outside the store sees it. */
export type Job = Omit<
  JobRow, "request" | "simulated" | "forced_kill" | "checkpoints" | "samples" | "dataset_report" | "base_model_print"
> & {
  request: JobRequest;
  simulated: boolean;
  forced_kill: boolean;
  /** The verified intermediate LoRAs still on disk. */
  checkpoints: Checkpoint[];
  /** The preview images of the run (and of the runs it resumed), as found on disk. */
  samples: Sample[];
  /** What the worker did to the dataset copy and found in it (a resume's is its predecessor's copy's). */
  dataset_report: DatasetReport | null;
  /** What the base model was at dispatch: a resume refuses a replaced one. */
  base_model_print: BaseModelPrint | null;
};

const reportJson = (dataset: DatasetOnRecord | null) =>
  dataset?.report == null ? null : JSON.stringify(dataset.report);

// Frozen: readers share what the store caches.
function toJob(row: JobRow): Job {
  return Object.freeze({
    ...row,
    request: JSON.parse(row.request) as JobRequest,
    simulated: row.simulated === 1,
    forced_kill: row.forced_kill === 1,
    checkpoints: row.checkpoints === null ? [] : (JSON.parse(row.checkpoints) as Checkpoint[]),
    samples: row.samples === null ? [] : (JSON.parse(row.samples) as Sample[]),
    dataset_report: row.dataset_report === null ? null : (JSON.parse(row.dataset_report) as DatasetReport),
    base_model_print: row.base_model_print === null ? null : (JSON.parse(row.base_model_print) as BaseModelPrint),
  });
}

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
  /** `preparing` for a claim (its dataset is copied next), the phase its files show for a job recorded again. */
  phase: Phase;
  /** The run's step count, known before the trainer says it (the tier's); null for a replayed recording. */
  totalSteps: number | null;
  /** What the job directory's copy of the dataset holds: null until the copy is done, and for a job recorded again
   * after its database was lost. */
  dataset: DatasetOnRecord | null;
  outputFile?: string | null;
  /** A resume: the job it continues and the state it starts from (its step is where progress starts). */
  resumes?: { id: string; step: number; state: string; digest: string | null } | null;
  /** What the base model was at dispatch (size, mtime, header digest): a resume refuses a replaced one. */
  baseModelPrint?: BaseModelPrint | null;
  /** The preview images the job starts with (a resume's predecessor's). */
  samples?: Sample[] | null;
  /** How many jobs may be active at once: 1 on this host, slurm.max_active_jobs on the Slurm backend. */
  maxActive?: number;
}

// The slot; or who holds it, who runs for the same output, or who resumed the same state first.
type Claim = Result<void, { activeId: string } | { outputUser: string } | { resumedBy: string | null }>;

interface ProgressFields {
  phase: Phase;
  step: number;
  total_steps: number | null;
  loss: number | null;
  eta_s: number | null;
}

// Enough for every job a status page or a client follows at once; past it the cache starts again.
const CACHED_ROWS = 256;
const ACTIVE_SQL = `status IN (${ACTIVE_STATUSES.map((s) => `'${s}'`).join(",")})`;

export type JobStore = ReturnType<typeof openJobStore>;

// A write the state dir could not take (SQLITE_FULL, I/O error, read-only): the caller keeps what it meant
// to write and tries again; the store remembers the failure until a write succeeds.
export class StoreWriteFailed extends Error {}

export interface WriteFailure {
  error: string;
  since: string;
}

// The filters that are no single status, as the job view decides them (api/job-view.ts resumeView).
const FILTER_SQL: Partial<Record<JobFilter, string>> = {
  paused: "status = 'cancelled' AND stop_reason = 'pause'",
  resumable: "status IN ('failed', 'cancelled') AND resume_state IS NOT NULL AND resumed_by IS NULL",
};

// Every transition is an UPDATE guarded by the states it may leave; `changes` says if it happened.
export function openJobStore(path: string, options: OpenOptions = { integrityCheck: true }) {
  const db = openChecked(path, options);
  const tallies = createJobTallies(db);
  const bump = (from: string | null, to: string) => tallies.moved(from, to);
  const statusOf = db.prepare<{ status: string }, [string]>("SELECT status FROM jobs WHERE id = ?");
  let failure: WriteFailure | null = null;
  // Rows as last read, for the answers that read one job many times a second: any write empties it, so a row here
  // is always what the database holds. Frozen, since every reader shares it.
  const rows = new Map<string, Job>();
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
      rows.clear();
    }
  };

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
  // One output, one run: an active job that will publish to the same file.
  const outputUser = db.prepare<{ id: string }, [string]>(
    `SELECT id FROM jobs WHERE output_file = ? AND ${ACTIVE_SQL} LIMIT 1`,
  );
  const dropResume = db.prepare("UPDATE jobs SET resume_step=NULL, resume_state=NULL, resume_gone=? WHERE id=?");
  const activeQuery = db.prepare<{ id: string }, []>(`SELECT id FROM jobs WHERE ${ACTIVE_SQL} LIMIT 1`);
  // Each answered from its partial index (schema.sql.ts), whatever the length of the history.
  const countOf = (index: string, filter: string | undefined) =>
    db.prepare<{ n: number }, []>(`SELECT count(*) AS n FROM jobs INDEXED BY ${index} WHERE ${filter}`);
  const countPaused = countOf("jobs_paused", FILTER_SQL.paused);
  const countResumable = countOf("jobs_saved", FILTER_SQL.resumable);
  const byId = db.prepare<JobRow, [string]>("SELECT * FROM jobs WHERE id = ?");
  const insertPoint = db.prepare("INSERT OR REPLACE INTO loss_points (job_id, step, loss) VALUES (?, ?, ?)");
  // Exactly one caller wins; the others learn who holds the slot or the output (or, for a resume, who resumed it
  // first).
  const insertIdle = (job: NewJob): Claim => {
    const resumes = job.resumes ?? null;
    const tx = db.transaction((): Claim => {
      const user = job.outputFile == null ? null : outputUser.get(job.outputFile);
      if (user) return fail({ outputUser: user.id });
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
      if (res.changes !== 1) return fail({ activeId: activeQuery.get()?.id ?? "unknown" });
      if (resumes && linkResume.run(job.id, resumes.id).changes !== 1) {
        throw new ResumeTaken(resumedBy.get(resumes.id)?.resumed_by ?? null);
      }
      return ok(undefined);
    });
    try {
      const claim = tx.immediate();
      if (claim.ok) bump(null, "starting");
      return claim;
    } catch (err) {
      if (err instanceof ResumeTaken) return fail({ resumedBy: err.by });
      throw err;
    }
  };
  // The mark comes before the removal (a kill in between leaves a marked job, never a half-removed resumable one),
  // and never lands on a directory holding the state another job's record would resume from.
  const markPrunedOne = db.prepare(
    `UPDATE jobs SET pruned_at=$now, checkpoints=NULL,
       resume_gone=CASE WHEN resume_state IS NULL THEN resume_gone ELSE $why END, resume_step=NULL, resume_state=NULL,
       resume_digest=NULL
     WHERE id=$id AND pruned_at IS NULL AND NOT (${ACTIVE_SQL})
       AND NOT EXISTS (SELECT 1 FROM jobs o WHERE o.id != $id AND o.resume_state LIKE $dir || '/%')`,
  );
  const markPrunedTx = db.transaction((jobs: ReadonlyArray<{ id: string; dir: string }>, now: string) => {
    const why = "its saved state was pruned by retention with its job directory";
    return jobs.filter(({ id, dir }) => markPrunedOne.run({ now, why, id, dir }).changes === 1).map((j) => j.id);
  });
  // A successor's own newer state replaces the predecessor's it started from.
  const releaseState = db.prepare(
    `UPDATE jobs SET resume_step=NULL, resume_state=NULL, resume_digest=NULL, resume_gone=?
     WHERE resume_state=? AND id!=?`,
  );
  // A resume that ended before its trainer started took nothing from its predecessor: the chain goes back to it, and
  // the resume no longer offers the state it never trained from (nor its dataset copy, which it does not keep).
  const untrainedResume = db.prepare<{ from_id: string; step: number }, [string]>(
    `SELECT s.resumed_from AS from_id, s.resume_step AS step FROM jobs s JOIN jobs p ON p.id = s.resumed_from
     WHERE s.id = ? AND s.started_at IS NULL AND p.resumed_by = s.id AND s.resume_state = p.resume_state`,
  );
  const unlinkResume = db.prepare("UPDATE jobs SET resumed_by=NULL WHERE id=? AND resumed_by=?");
  const handBack = (id: string) => {
    const chain = untrainedResume.get(id);
    if (chain === null) return;
    unlinkResume.run(chain.from_id, id);
    const why = `it ended before its trainer started and took nothing from job ${chain.from_id}: ` +
      `resume job ${chain.from_id} instead (its saved state at step ${chain.step})`;
    db.run("UPDATE jobs SET resume_step=NULL, resume_state=NULL, resume_digest=NULL, resume_gone=? WHERE id=?", [
      why, id,
    ]);
  };
  const endJob = db.prepare(
    `UPDATE jobs SET status=?, exit_code=?, signal=?, forced_kill=?, error=?, error_code=?,
       lora_path=?, lora_sha256=?, lora_bytes=?, ended_at=?, eta_s=NULL
     WHERE id=? AND ${ACTIVE_SQL}`,
  );
  const finishTx = db.transaction((id: string, o: Outcome, now: string): boolean => {
    const values = [
      o.status, o.exit_code, o.signal, o.forced_kill ? 1 : 0, o.error, o.error_code,
      o.lora_path, o.lora_sha256, o.lora_bytes, now, id,
    ];
    if (!changed(endJob.run(...values))) return false;
    handBack(id);
    return true;
  });
  const appendPoints = db.transaction((id: string, points: LossPoint[]) => {
    for (const [step, loss] of points) insertPoint.run(id, step, loss);
  });
  const updateProgress = db.prepare(
    `UPDATE jobs SET phase=?, step=?, total_steps=?, loss=?, eta_s=? WHERE id=? AND ${ACTIVE_SQL}`,
  );
  const progressTx = db.transaction((id: string, p: ProgressFields, points: LossPoint[]) => {
    const res = updateProgress.run(p.phase, p.step, p.total_steps, p.loss, p.eta_s, id);
    for (const [step, loss] of points) insertPoint.run(id, step, loss);
    return res;
  });
  // In WAL mode a commit at NORMAL is not fsynced: a power loss may roll it back (never corrupt), and the next
  // commit at FULL syncs the log it follows. The setting is per connection and must change outside a transaction.
  const [normal, full] = [db.prepare("PRAGMA synchronous = NORMAL"), db.prepare("PRAGMA synchronous = FULL")];
  const unsynced = <T>(fn: () => T): T => {
    normal.run();
    try {
      return fn();
    } finally {
      full.run();
    }
  };

  return {
    insertIfIdle(job: NewJob): Claim {
      return write(() => insertIdle(job));
    },
    // A job alive in its directory but missing from the database: recorded again, as it began.
    insertRecovered(job: NewJob): boolean {
      return write(() => insertIdle(job).ok);
    },
    // What a run's saved states allow now; written at each verified checkpoint and at the end.
    saveResumePoint(id: string, point: ResumePoint): boolean {
      return write(() => changed(
        db.run(
          "UPDATE jobs SET resume_step=?, resume_state=?, resume_digest=?, checkpoints=?, resume_gone=? WHERE id=?",
          [point.step, point.state, point.digest, JSON.stringify(point.checkpoints), point.gone, id],
        ),
      ));
    },
    /** The state is gone (pruned, removed): the job is no longer resumable, and the record says why. */
    dropResume(id: string, why: string): boolean {
      return write(() => changed(dropResume.run(why, id)));
    },
    // The job directory is filled: what its dataset copy holds goes on record (a resume's was known at its claim),
    // and the job moves on to its launch.
    markPrepared(id: string, dataset: DatasetOnRecord | null): boolean {
      const sql = `UPDATE jobs SET phase='loading', dataset_files=COALESCE(?, dataset_files),
          dataset_bytes=COALESCE(?, dataset_bytes), dataset_sha256=COALESCE(?, dataset_sha256),
          dataset_report=COALESCE(?, dataset_report)
        WHERE id=? AND ${ACTIVE_SQL}`;
      const values = [dataset?.files ?? null, dataset?.bytes ?? null, dataset?.sha256 ?? null, reportJson(dataset), id];
      return write(() => changed(db.run(sql, values)));
    },
    saveSamples(id: string, samples: Sample[]): boolean {
      return write(() => changed(db.run("UPDATE jobs SET samples=? WHERE id=?", [JSON.stringify(samples), id])));
    },
    requestPause(id: string, now: string): boolean {
      const sql = `UPDATE jobs SET pause_requested_at=COALESCE(pause_requested_at, ?) WHERE id=? AND ${ACTIVE_SQL}`;
      return write(() => changed(db.run(sql, [now, id])));
    },
    /** Null while writes succeed; otherwise the first failure since the last write that worked. */
    writeFailure(): WriteFailure | null {
      return failure;
    },
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
    // Newest first, keyset-paged on (created_at, id) so a page never shifts under inserts.
    list(filter: JobFilter | null, limit: number, after: { createdAt: string; id: string } | null): Job[] {
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
    },
    countByStatus: tallies.byStatus,
    countFailuresByCode: tallies.failuresByCode,
    /** The ended jobs a person looks for: paused ones, and those a resume can still continue. */
    countSaved(): { paused: number; resumable: number } {
      return { paused: countPaused.get()!.n, resumable: countResumable.get()!.n };
    },
    byIdempotencyKey(key: string): Job | null {
      const row = db.query<JobRow, [string]>("SELECT * FROM jobs WHERE idempotency_key = ?").get(key);
      return row === null ? null : toJob(row);
    },
    // Ended before `endedBefore` and not among the newest `keepLast` jobs: their directories may go; records stay.
    prunable(endedBefore: string, keepLast: number): Array<Pick<JobRow, "id" | "resume_state" | "resumed_by">> {
      return db
        .query<Pick<JobRow, "id" | "resume_state" | "resumed_by">, [string, number]>(
          `SELECT id, resume_state, resumed_by FROM jobs
           WHERE NOT (${ACTIVE_SQL}) AND pruned_at IS NULL AND ended_at < ?
           AND id NOT IN (SELECT id FROM jobs ORDER BY created_at DESC, id DESC LIMIT ?)`,
        )
        .all(endedBefore, keepLast);
    },
    // One commit for a whole batch: a backlog of thousands is not thousands of fsyncs. Returns the jobs marked:
    // their directories may go now.
    markPruned(jobs: ReadonlyArray<{ id: string; dir: string }>, now: string): string[] {
      return jobs.length > 0 ? write(() => markPrunedTx.immediate(jobs, now)) : [];
    },
    /** Whether retention marked the job: its directory goes (or went). */
    isPruned(id: string): boolean {
      return (byId.get(id)?.pruned_at ?? null) !== null;
    },
    /** `state` is replaced by `by`'s newer one: the jobs it came from no longer offer it. */
    releaseState(state: string, by: string, why: string): boolean {
      return write(() => releaseState.run(why, state, by).changes > 0);
    },
    /** An active job that publishes to `outputFile`, if one does. */
    outputUser(outputFile: string): string | null {
      return outputUser.get(outputFile)?.id ?? null;
    },
    activeJobs(): Job[] {
      return db.query<JobRow, []>(`SELECT * FROM jobs WHERE ${ACTIVE_SQL}`).all().map(toJob);
    },
    markSpawned(id: string, identity: ProcessIdentity, now: string): boolean {
      return write(() => changed(
        db.run(
          `UPDATE jobs SET pid=?, pid_start_ticks=?, boot_id=?, started_at=? WHERE id=? AND status='starting'`,
          [identity.pid, identity.startTicks, identity.bootId, now, id],
        ),
      ));
    },
    markShim(id: string, identity: ProcessIdentity): boolean {
      return write(() => changed(
        db.run(
          `UPDATE jobs SET shim_pid=?, shim_start_ticks=?, boot_id=? WHERE id=? AND ${ACTIVE_SQL}`,
          [identity.pid, identity.startTicks, identity.bootId, id],
        ),
      ));
    },
    markSlurm(id: string, jobId: string): boolean {
      return write(() => changed(db.run(`UPDATE jobs SET slurm_job_id=? WHERE id=? AND ${ACTIVE_SQL}`, [jobId, id])));
    },
    // A run placed by a scheduler has no trainer identity of this host to record: it started when it began to run.
    markStarted(id: string, now: string): boolean {
      const sql = `UPDATE jobs SET started_at=COALESCE(started_at, ?) WHERE id=? AND ${ACTIVE_SQL}`;
      return write(() => changed(db.run(sql, [now, id])));
    },
    markTraining(id: string): boolean {
      const sql = "UPDATE jobs SET status='training' WHERE id=? AND status='starting'";
      const moved = write(() => changed(db.run(sql, [id])));
      if (moved) bump("starting", "training");
      return moved;
    },
    saveProgress(id: string, p: ProgressFields): boolean {
      return write(() => changed(updateProgress.run(p.phase, p.step, p.total_steps, p.loss, p.eta_s, id)));
    },
    // A running job's periodic progress, in one unsynced commit: one lost to a power cut is rewritten by the next.
    saveProgressUnsynced(id: string, p: ProgressFields, points: LossPoint[]): boolean {
      return write(() => unsynced(() => changed(progressTx.immediate(id, p, points))));
    },
    appendLoss(id: string, points: LossPoint[]): void {
      if (points.length > 0) write(() => appendPoints.immediate(id, points));
    },
    lossHistory(id: string): LossPoint[] {
      return db
        .query<{ step: number; loss: number | null }, [string]>(
          "SELECT step, loss FROM loss_points WHERE job_id = ? ORDER BY step",
        )
        .all(id)
        .map((r) => [r.step, r.loss]);
    },
    // The first reason wins: a cancel after a watchdog fired does not rewrite why the run stopped, nor when.
    requestStop(id: string, reason: StopReason, now: string): boolean {
      const cancelAt = reason === "cancel" ? now : null;
      return write(() => changed(
        db.run(
          `UPDATE jobs SET stop_reason=COALESCE(stop_reason, ?), stop_requested_at=COALESCE(stop_requested_at, ?),
             cancel_requested_at=COALESCE(cancel_requested_at, ?)
           WHERE id=? AND ${ACTIVE_SQL}`,
          [reason, now, cancelAt, id],
        ),
      ));
    },
    // The job's one final record; a resume that never started a trainer hands its chain back in the same commit.
    finish(id: string, o: Outcome, now: string): boolean {
      const from = statusOf.get(id)?.status ?? null;
      const ended = write(() => finishTx.immediate(id, o, now));
      if (ended && from !== null) bump(from, o.status);
      if (ended && o.status === "failed" && o.error_code !== null) tallies.failed(o.error_code);
      return ended;
    },
    close(): void {
      db.close();
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
