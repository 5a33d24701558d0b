import { counted } from "../counted.ts";
import type { DatasetIdentity, IdentityNote, IdentityUnscored } from "../job.ts";

// The dataset identity as the status page and the CLI show it: the wire carries these as its `text` and each
// note's `text`, so both readers say the same.

const UNSCORED: Record<IdentityUnscored, string> = {
  too_few_single_faces: "fewer than half the photos show one face (a pet, a product, a style?)",
  scorer_missing: "no face scorer (lora-worker doctor's likeness line says how to add it)",
  scorer_failed: "the face scorer failed (the worker's log says why)",
};

/** The identity in one line: how many photos show one face, none or several, and the spread or why not scored. */
export function identitySentence(identity: DatasetIdentity): string {
  const { photos } = identity;
  const counts = `${counted(photos.one_face, "photo")} with one face, ${photos.no_face} with none, ` +
    `${photos.several_faces} with several`;
  return identity.scored
    ? `${counts}; spread ${identity.spread} (a match is at most ${identity.threshold})`
    : `not scored: ${UNSCORED[identity.reason!]}; ${counts}`;
}

/** One photo's identity note as a sentence. */
export function identityNoteSentence(note: IdentityNote): string {
  switch (note.note) {
    case "no_face": return "no face";
    case "several_faces": return `${note.faces} faces`;
    case "other_person": return `someone else: ${note.distance} from the others' face, past ${note.threshold}`;
    case "unreadable": return `the face model could not read it: ${note.error}`;
  }
}
