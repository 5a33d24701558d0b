import type { DatasetIdentity, IdentityNote } from "../job.ts";
import { meanEmbedding } from "./identity.ts";
import { faceDistance, SAME_PERSON, type ScorerFault } from "./points.ts";
import type { ScoredPhoto, Scorer } from "./scorer.ts";
import { fail, ok, type Result } from "../result.ts";

/** A dataset photo as the scorer saw it, under the name arbo gave it. */
export interface NamedPhoto {
  file: string;
  scored: ScoredPhoto;
}

const round = (distance: number) => Number(distance.toFixed(4));

/**
 * The dataset's identity from its scored photos (SPEC §8): the photos that show exactly one face make it; each of
 * them is judged against the mean of the others (leave-one-out), so one stranger cannot pull the identity to
 * itself. Fewer than half with one face: not scored, nothing judged.
 */
export function datasetIdentity(scored: Result<NamedPhoto[], ScorerFault>): DatasetIdentity {
  const base = { photos: { one_face: 0, no_face: 0, several_faces: 0 }, spread: null, threshold: SAME_PERSON };
  if (!scored.ok) return { ...base, scored: false, reason: scored.error.reason, notes: [] };
  const notes: IdentityNote[] = [];
  const single: Array<{ file: string; embedding: number[] }> = [];
  for (const { file, scored: photo } of scored.value) {
    if ("error" in photo) notes.push({ file, note: "unreadable", error: photo.error });
    else if (photo.faces.length === 0) notes.push({ file, note: "no_face" });
    else if (photo.faces.length > 1) notes.push({ file, note: "several_faces", faces: photo.faces.length });
    else single.push({ file, embedding: photo.faces[0]!.embedding });
  }
  const photos = {
    one_face: single.length,
    no_face: notes.filter((n) => n.note === "no_face" || n.note === "unreadable").length,
    several_faces: notes.filter((n) => n.note === "several_faces").length,
  };
  if (single.length < 2 || single.length * 2 < scored.value.length) {
    return { ...base, photos, scored: false, reason: "too_few_single_faces", notes };
  }
  const distances = single.map(({ embedding }, at) =>
    faceDistance(embedding, meanEmbedding(single.filter((_, i) => i !== at).map((s) => s.embedding)))
  );
  for (const [at, distance] of distances.entries()) {
    if (distance > SAME_PERSON) {
      notes.push({ file: single[at]!.file, note: "other_person", distance: round(distance), threshold: SAME_PERSON });
    }
  }
  const order = scored.value.map((p) => p.file);
  notes.sort((a, b) => order.indexOf(a.file) - order.indexOf(b.file));
  const spread = round(distances.reduce((a, b) => a + b, 0) / distances.length);
  return { photos, spread, threshold: SAME_PERSON, scored: true, reason: null, notes };
}

/** Scores the photos at `paths` (named `files`) and judges them; without a scorer, not scored: scorer_missing. */
export async function identityOfPhotos(
  scorer: Scorer | null, paths: readonly string[], files: readonly string[],
): Promise<DatasetIdentity> {
  if (scorer === null) return datasetIdentity(fail({ reason: "scorer_missing", detail: "no [likeness] python" }));
  const scored = await scorer.score(paths);
  if (!scored.ok) return datasetIdentity(scored);
  return datasetIdentity(ok(scored.value.map((photo, at) => ({ file: files[at]!, scored: photo }))));
}
