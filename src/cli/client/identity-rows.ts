import type { JobView } from "./worker-client.ts";

type Identity = NonNullable<NonNullable<NonNullable<JobView["dataset"]>["prepared"]>["identity"]>;

/** Whose faces the dataset's photos show: one row, then a row per photo with a note. */
export function identityRows(identity: Identity | undefined): [string, string][] {
  if (identity === undefined) return [];
  const notes = identity.notes.map((note): [string, string] => ["", `${note.file}: ${note.text}`]);
  return [["faces", identity.text], ...notes];
}
