import type { LikenessPoint, LikenessSeries, LikenessVerdict, NotScoredReason } from "../job.ts";

export interface Judgement {
  verdict: LikenessVerdict;
  reason: NotScoredReason | null;
  best_step: number | null;
}

/** A run that could not be scored, and why. */
export function notScored(reason: NotScoredReason): Judgement {
  return { verdict: "not_scored", reason, best_step: null };
}

// face_recognition's compare_faces: a face at or under the threshold is the person's.
const matches = (series: LikenessSeries, threshold: number) => series.distance !== null && series.distance <= threshold;

/**
 * The verdict of a run from its scored preview points: `overfit` when the class previews show the person at the
 * last point, `undertrained` when no point's trigger previews do, else `learned`; no face in any preview is
 * `not_scored`. The best step is the closest trigger likeness among the points whose class previews do not match
 * (the earlier one on a tie: fewer steps, less bleed).
 */
export function judgeLikeness(points: readonly LikenessPoint[], threshold: number): Judgement {
  if (points.length === 0) return notScored("no_previews");
  if (points.every((p) => p.trigger.faces === 0 && p.class.faces === 0)) return notScored("no_face_in_previews");
  const ordered = points.toSorted((a, b) => a.step - b.step);
  const last = ordered.at(-1)!;
  const verdict: LikenessVerdict = matches(last.class, threshold)
    ? "overfit"
    : ordered.some((p) => matches(p.trigger, threshold)) ? "learned" : "undertrained";
  let best: LikenessPoint | null = null;
  for (const p of ordered) {
    if (p.trigger.distance === null || matches(p.class, threshold)) continue;
    if (best === null || p.trigger.distance < best.trigger.distance!) best = p;
  }
  return { verdict, reason: null, best_step: best?.step ?? null };
}
