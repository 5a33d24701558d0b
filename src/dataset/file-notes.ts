import { type DatasetReport, FILE_NOTES_LISTED, type FileNote, LONGEST_WINDOW } from "../job.ts";

// The per-file part of a dataset report: what was done to each file, in file order, the first FILE_NOTES_LISTED
// listed and the rest counted, so a dataset of thousands of images keeps a record of bounded size.

/** The notes as the report lists them. */
export function listNotes(notes: FileNote[]): Pick<DatasetReport, "files" | "files_not_listed"> {
  const sorted = notes.toSorted((a, b) => (a.file < b.file ? -1 : a.file > b.file ? 1 : 0));
  const left = Math.max(0, sorted.length - FILE_NOTES_LISTED);
  return { files: sorted.slice(0, FILE_NOTES_LISTED), files_not_listed: left };
}

/**
 * A kohya folder's name (`<repeats>_<trigger> <class>`) that names another trigger or class than the request: the
 * request's are trained (the dataset TOML gives sd-scripts the class_tokens and repeats, so it reads no folder name),
 * and the record says so. The trigger is compared as CLIP reads it, lowercased.
 */
export function folderWarnings(target: { folder: string | null; trigger: string; subjectClass: string }): string[] {
  if (target.folder === null) return [];
  const named = target.folder.slice(target.folder.indexOf("_") + 1);
  const [trigger = "", ...classWords] = named.split(/\s+/);
  const wanted = `${target.trigger} ${target.subjectClass}`;
  if (trigger.toLowerCase() === target.trigger.toLowerCase() && classWords.join(" ") === target.subjectClass) return [];
  return [
    `the folder "${target.folder}" names "${named}", the request "${wanted}": the request's trigger and class ` +
      `are trained (the captions are led with "${wanted}, " and images without a caption train on "${wanted}")`,
  ];
}

/** A file's note as the status page and the CLI show it: the wire carries it as the note's `text`. */
export function noteSentence(note: FileNote): string {
  switch (note.did) {
    case "trigger_added": return `trigger added ("${note.prefix}" in front)`;
    case "trigger_moved": return `trigger past the context (${LONGEST_WINDOW} tokens): "${note.prefix}" in front`;
    case "caption_kept": return "caption kept";
    case "no_caption": return `no caption: trains on "${note.trains_on}"`;
    case "turned_upright": return `turned upright, re-encoded as PNG: ${note.stored_as}`;
    case "small": return `small: scaled up ${Math.round(note.scale * 100) / 100}x`;
    case "duplicate": return `the same bytes as ${note.same_as}`;
  }
}
