import type { Likeness, LossPoint, Outcome, ProgressFields, ResumePoint, Sample, StopReason } from "../job.ts";
import type { ProcessIdentity } from "../os/proc.ts";
import type { Job } from "./job-row.ts";

/** What one run may read and write of its own record, bound to it: every write of a run goes through here, so what
 * a run may do to the database is this type. Each write is one guarded transition; it says whether it moved. */
export interface JobRecord {
  readonly id: string;
  /** The record as it stands now. */
  read(): Job | null;
  /** The trainer's first words: `starting` becomes `training`. */
  markTraining(): boolean;
  /** Progress taken in so far, with its loss points, in one unsynced commit (the end writes durably). */
  saveProgressUnsynced(progress: ProgressFields, points: LossPoint[]): boolean;
  saveProgress(progress: ProgressFields): boolean;
  appendLoss(points: LossPoint[]): void;
  saveResumePoint(point: ResumePoint): boolean;
  /** The predecessor's `state` this run started from is replaced by this run's own newer one. */
  releaseState(state: string, why: string): boolean;
  saveSamples(samples: Sample[]): boolean;
  saveLikeness(likeness: Likeness): boolean;
  requestStop(reason: StopReason, at: string): boolean;
  requestPause(at: string): boolean;
  /** The job's one final record. */
  finish(outcome: Outcome, at: string): boolean;
  /** The shim that starts the trainer (this host); an identity already recorded is kept. */
  markShim(identity: ProcessIdentity): boolean;
  /** The trainer, while the job is `starting` and none is recorded; its start is the run's. */
  markSpawned(identity: ProcessIdentity, at: string): boolean;
  /** The scheduler's id of the run (Slurm). */
  markScheduled(schedulerId: string): boolean;
  /** When a scheduler began to run it: the first time only. */
  markStarted(at: string): boolean;
}

// The store's writes that take a job id first, as JobRecord binds them.
interface RecordWrites {
  get(id: string): Job | null;
  markTraining(id: string): boolean;
  saveProgressUnsynced(id: string, progress: ProgressFields, points: LossPoint[]): boolean;
  saveProgress(id: string, progress: ProgressFields): boolean;
  appendLoss(id: string, points: LossPoint[]): void;
  saveResumePoint(id: string, point: ResumePoint): boolean;
  releaseState(state: string, by: string, why: string): boolean;
  saveSamples(id: string, samples: Sample[]): boolean;
  saveLikeness(id: string, likeness: Likeness): boolean;
  requestStop(id: string, reason: StopReason, at: string): boolean;
  requestPause(id: string, at: string): boolean;
  finish(id: string, outcome: Outcome, at: string): boolean;
  markShim(id: string, identity: ProcessIdentity): boolean;
  markSpawned(id: string, identity: ProcessIdentity, at: string): boolean;
  markSlurm(id: string, schedulerId: string): boolean;
  markStarted(id: string, at: string): boolean;
}

/** The record of job `id`, as a run writes it. */
export function bindRecord(store: RecordWrites, id: string): JobRecord {
  return {
    id,
    read: () => store.get(id),
    markTraining: () => store.markTraining(id),
    saveProgressUnsynced: (progress, points) => store.saveProgressUnsynced(id, progress, points),
    saveProgress: (progress) => store.saveProgress(id, progress),
    appendLoss: (points) => store.appendLoss(id, points),
    saveResumePoint: (point) => store.saveResumePoint(id, point),
    releaseState: (state, why) => store.releaseState(state, id, why),
    saveSamples: (samples) => store.saveSamples(id, samples),
    saveLikeness: (likeness) => store.saveLikeness(id, likeness),
    requestStop: (reason, at) => store.requestStop(id, reason, at),
    requestPause: (at) => store.requestPause(id, at),
    finish: (outcome, at) => store.finish(id, outcome, at),
    markShim: (identity) => store.markShim(id, identity),
    markSpawned: (identity, at) => store.markSpawned(id, identity, at),
    markScheduled: (schedulerId) => store.markSlurm(id, schedulerId),
    markStarted: (at) => store.markStarted(id, at),
  };
}
