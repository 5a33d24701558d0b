import type { Checkpoint, Likeness, NotScoredReason, Sample } from "../job.ts";
import type { Logger } from "../logger.ts";
import type { Result } from "../result.ts";
import { readdir } from "node:fs/promises";
import { join } from "node:path";
import { identityOf } from "../likeness/identity.ts";
import { isImage } from "../request/dataset.ts";
import type { Job } from "../store/job-store.ts";
import { pointOf, type FaceEmbedder, type ScoredImage, type ScorerFault } from "../likeness/points.ts";
import { judgeLikeness, notScored } from "../likeness/verdict.ts";
import { sampleOf } from "../recipe/samples.ts";

/** How a run's previews are scored: against the dataset's identity through the scorer, or not at all, and why. */
export type LikenessPlan =
  | { embedder: FaceEmbedder; identity: () => Promise<Result<number[] | null, ScorerFault>>; threshold: number }
  | { reason: NotScoredReason; threshold: number };

/** The scorer the worker's runs score their previews with (chosen once), or none: `not_scored: scorer_missing`. */
export interface LikenessScoring {
  embedder: FaceEmbedder | null;
  threshold: number;
}

/** How job `row`'s run is scored: its previews (none asked: `no_previews`) against its dataset copy's identity,
 * made once, at its first point. */
export function likenessPlan(scoring: LikenessScoring, row: Job, datasetDir: string): LikenessPlan {
  const { embedder, threshold } = scoring;
  if ((row.request.samples ?? 0) === 0) return { reason: "no_previews", threshold };
  if (embedder === null) return { reason: "scorer_missing", threshold };
  let identity: Promise<Result<number[] | null, ScorerFault>> | null = null;
  const photos = async () =>
    (await readdir(datasetDir, { recursive: true })).filter(isImage).sort().map((name) => join(datasetDir, name));
  return { embedder, threshold, identity: () => (identity ??= photos().then((all) => identityOf(embedder, all))) };
}

interface LikenessDeps {
  plan: LikenessPlan;
  // What the record holds already (an adopted run's points).
  known: Likeness | null;
  save: (likeness: Likeness) => void;
  log: Logger;
  jobId: string;
}

/**
 * Scores each preview point as its images come onto the record: one point at a time, in the scorer's own process,
 * so neither the event loop nor the trainer waits on it. Each point reaches the record (and so the job's event
 * stream) as it is scored; `end` waits for the last, then judges.
 */
export function followLikeness(deps: LikenessDeps) {
  const { plan, log, jobId } = deps;
  let points = deps.known?.points ?? [];
  const queued = new Set(points.map((p) => p.step));
  let failure: NotScoredReason | null = null;
  let queue = Promise.resolve();
  const report = (): Likeness =>
    ({ threshold: plan.threshold, points, verdict: null, reason: null, best_step: null, best_sha256: null });
  const score = async (step: number, samples: Sample[]) => {
    if (!("embedder" in plan) || failure !== null) return;
    const identity = await plan.identity();
    if (!identity.ok) {
      failure = identity.error.reason;
      return log.warn("could not score the dataset", { job_id: jobId, error: identity.error.detail });
    }
    if (identity.value === null) return void (failure = "no_identity");
    const embedded = await plan.embedder.embed(samples.map((s) => s.path));
    if (!embedded.ok) {
      failure = embedded.error.reason;
      return log.warn("could not score a preview point", { job_id: jobId, step, error: embedded.error.detail });
    }
    const images = samples.flatMap((sample, at): ScoredImage[] => {
      const subject = sampleOf(sample.index)?.subject;
      return subject === undefined ? [] : [{ name: sample.name, subject, faces: embedded.value[at] ?? [] }];
    });
    points = [...points, pointOf(step, images, identity.value)].toSorted((a, b) => a.step - b.step);
    deps.save(report());
  };
  return {
    /** Samples of whole points (every image drawn): each step not queued yet is scored after those before it. */
    seen(samples: readonly Sample[]): void {
      const steps = [...new Set(samples.map((s) => s.step))].filter((s) => !queued.has(s)).toSorted((a, b) => a - b);
      for (const step of steps) {
        queued.add(step);
        const images = samples.filter((s) => s.step === step);
        queue = queue.then(() => score(step, images)).catch((err: Error) => {
          failure = "scorer_failed";
          log.error("scoring a preview point failed", { job_id: jobId, step, error: err.message });
        });
      }
    },
    /** The report once the last point is scored, with its verdict and the best step's kept LoRA. */
    async end(kept: readonly Checkpoint[]): Promise<Likeness> {
      await queue;
      const reason = "reason" in plan ? plan.reason : failure;
      const judged = reason === null ? judgeLikeness(points, plan.threshold) : notScored(reason);
      const best = kept.find((k) => k.step === judged.best_step)?.sha256 ?? null;
      const final = { ...report(), ...judged, best_sha256: best };
      deps.save(final);
      return final;
    },
  };
}
