import { noteSentence } from "../dataset/file-notes.ts";
import type { DatasetReport } from "../job.ts";
import { identityNoteSentence, identitySentence } from "../likeness/identity-text.ts";

/** A dataset report as the wire carries it: each note, and the identity, with the sentence its readers show. */
export function datasetReportView(report: DatasetReport) {
  const { files, identity } = report;
  return {
    ...report,
    ...(files === undefined ? {} : { files: files.map((note) => ({ ...note, text: noteSentence(note) })) }),
    ...(identity === undefined ? {} : {
      identity: {
        ...identity,
        text: identitySentence(identity),
        notes: identity.notes.map((note) => ({ ...note, text: identityNoteSentence(note) })),
      },
    }),
  };
}
