import type { LikenessPoint, LikenessSeries } from "../job.ts";
import type { Result } from "../result.ts";

/** Why the scorer gave no answer: not installed in its Python (the fix is a pip install), or it failed. */
export interface ScorerFault {
  reason: "scorer_missing" | "scorer_failed";
  detail: string;
}

/** The scorer as a preview point needs it: per image path, in order, the 128-D embedding of each face found in it
 * (none for an image without a face); or why the scorer could not answer. */
export interface FaceEmbedder {
  embed(paths: readonly string[]): Promise<Result<number[][][], ScorerFault>>;
}

/** A preview image of a point, with whom its prompt called up and the faces found in it. */
export interface ScoredImage {
  name: string;
  subject: "trigger" | "class";
  faces: number[][];
}

/** The distance at or under which two faces are one person's: dlib's, as face_recognition's compare_faces uses it
 * (dlib's model card: 99.38 % on Labeled Faces in the Wild at 0.6). */
export const SAME_PERSON = 0.6;

// face_recognition's face_distance: the Euclidean distance between two embeddings.
export function faceDistance(a: readonly number[], b: readonly number[]): number {
  let sum = 0;
  for (const [i, v] of a.entries()) sum += (v - b[i]!) ** 2;
  return Math.sqrt(sum);
}

/** A preview point from its scored images: per subject, the mean over its images with a face of each image's face
 * closest to the identity (a preview may show the person among others). */
export function pointOf(step: number, images: readonly ScoredImage[], identity: readonly number[]): LikenessPoint {
  const series = (subject: ScoredImage["subject"]): LikenessSeries => {
    const mine = images.filter((image) => image.subject === subject);
    const closest = mine.flatMap(({ faces }) =>
      faces.length === 0 ? [] : [Math.min(...faces.map((face) => faceDistance(face, identity)))]
    );
    const distance = closest.length === 0 ? null : closest.reduce((a, b) => a + b, 0) / closest.length;
    const faces = mine.reduce((count, image) => count + image.faces.length, 0);
    return { distance: distance === null ? null : Number(distance.toFixed(4)), faces, files: mine.map((i) => i.name) };
  };
  return { step, trigger: series("trigger"), class: series("class") };
}
