import type { DatasetIdentity } from "../job.ts";
import { identityOfPhotos } from "../likeness/dataset-identity.ts";
import { isImage } from "../request/dataset.ts";
import type { CheckedTrain } from "../request/check.ts";
import { fieldError } from "../request/schema.ts";
import { fail, ok, type Result } from "../result.ts";
import type { DispatchContext } from "./context.ts";
import type { DispatchRefusal } from "./refusal.ts";

/**
 * `identity_check: "refuse"`: arbo's checked photos are scored before anything is made (no row, no file), so a
 * photo of someone else is a 422 `dataset_other_person` naming every such file; the identity is then the copy's.
 * A dataset that cannot be scored (too few one-face photos, no scorer) is not refused: its report says why.
 * Any other check: null, the copy is scored as it is prepared.
 */
export async function identityBeforeClaim(
  ctx: DispatchContext, train: CheckedTrain,
): Promise<Result<DatasetIdentity | null, DispatchRefusal>> {
  if (train.request.identity_check !== "refuse") return ok(null);
  const photos = train.dataset.files.filter((file) => isImage(file.rel));
  const identity = await identityOfPhotos(ctx.scorer, photos.map((f) => f.real), photos.map((f) => f.rel));
  const others = identity.notes.flatMap((note) => (note.note === "other_person" ? [note] : []));
  if (others.length === 0) return ok(identity);
  const detail = others.map(({ file, distance, threshold }) => fieldError(
    "dataset_dir",
    `${file} shows someone else: its face is ${distance} from the mean face of the other photos, past ${threshold} ` +
      '(identity_check: "refuse"); remove it, or send identity_check "warn"',
    "dataset_other_person",
  ));
  return fail({ kind: "invalid", detail });
}
