import { ok, type Result } from "../result.ts";
import type { FaceEmbedder, ScorerFault } from "./points.ts";

// Until #47 item 2's `dataset.prepared.identity` is on the record: the identity made from the job's dataset copy
// as that item defines it, the mean embedding of the photos that show exactly one face, or null when fewer than
// half of them do (a dog, a product, a style); or why the scorer could not say.
export async function identityOf(
  embedder: FaceEmbedder, photos: readonly string[],
): Promise<Result<number[] | null, ScorerFault>> {
  if (photos.length === 0) return ok(null);
  const embedded = await embedder.embed(photos);
  if (!embedded.ok) return embedded;
  const single = embedded.value.flatMap((faces) => (faces.length === 1 ? [faces[0]!] : []));
  if (single.length * 2 < photos.length) return ok(null);
  return ok(meanEmbedding(single));
}

/** The mean of one or more embeddings, coordinate by coordinate. */
export function meanEmbedding(faces: readonly (readonly number[])[]): number[] {
  return faces[0]!.map((_, i) => faces.reduce((sum, face) => sum + face[i]!, 0) / faces.length);
}
