import { counted } from "./counted.ts";
import type { JobView } from "./worker-client.ts";

type Identity = NonNullable<NonNullable<NonNullable<JobView["dataset"]>["prepared"]>["identity"]>;
type IdentityNote = Identity["notes"][number];

const UNSCORED: Record<NonNullable<Identity["reason"]>, string> = {
  too_few_single_faces: "fewer than half the photos show one face (a pet, a product, a style?)",
  scorer_missing: "no face scorer (lora-worker doctor's likeness line says how to add it)",
  scorer_failed: "the face scorer failed (the worker's log says why)",
};

/** Whose faces the dataset's photos show: one row, then a row per photo with a note. */
export function identityRows(identity: Identity | undefined): [string, string][] {
  if (identity === undefined) return [];
  const { photos } = identity;
  const counts = `${counted(photos.one_face, "photo")} with one face, ${photos.no_face} with none, ` +
    `${photos.several_faces} with several`;
  const head = identity.scored
    ? `${counts}; spread ${identity.spread} (a match is at most ${identity.threshold})`
    : `not scored: ${UNSCORED[identity.reason!]}; ${counts}`;
  return [["faces", head], ...identity.notes.map((note): [string, string] => ["", `${note.file}: ${noteText(note)}`])];
}

function noteText(note: IdentityNote): string {
  switch (note.note) {
    case "no_face": return "no face";
    case "several_faces": return `${note.faces} faces`;
    case "other_person": return `someone else: ${note.distance} from the others' face, past ${note.threshold}`;
    case "unreadable": return `the face model could not read it: ${note.error}`;
  }
}
