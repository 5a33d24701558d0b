import { describe, expect, test } from "bun:test";
import { datasetIdentity, type NamedPhoto } from "../../src/likeness/dataset-identity.ts";
import { fail, ok } from "../../src/result.ts";

// Embeddings on one axis: a face at x lies |x - y| from one at y.
const at = (x: number) => Array.from({ length: 128 }, (_, i) => (i === 0 ? x : 0));
const face = (x: number) => ({ box: [0, 0, 1, 1] as [number, number, number, number], score: 1, embedding: at(x) });
const photo = (file: string, ...xs: number[]): NamedPhoto => ({ file, scored: { faces: xs.map(face) } });

describe("a dataset's identity from its scored photos", () => {
  test("each one-face photo is judged against the mean of the others: one at 0.9 is other_person, those at 0 are not", () => {
    const identity = datasetIdentity(ok([photo("a", 0), photo("b", 0), photo("c", 0), photo("d", 0.9)]));
    // d lies 0.9 from the others' mean 0; each of a-c lies 0.3 from the mean of the two others and d.
    expect(identity.notes).toEqual([{ file: "d", note: "other_person", distance: 0.9, threshold: 0.6 }]);
    expect(identity).toMatchObject({ scored: true, photos: { one_face: 4, no_face: 0, several_faces: 0 }, spread: 0.45 });
  });

  test("fewer than half with one face is not scored, with each photo's note in file order", () => {
    const identity = datasetIdentity(ok([
      photo("a"), photo("b", 0, 1), photo("c", 0), { file: "d", scored: { error: "RuntimeError: bad" } }, photo("e"),
    ]));
    expect(identity).toEqual({
      scored: false, reason: "too_few_single_faces", photos: { one_face: 1, no_face: 3, several_faces: 1 },
      spread: null, threshold: 0.6,
      notes: [
        { file: "a", note: "no_face" }, { file: "b", note: "several_faces", faces: 2 },
        { file: "d", note: "unreadable", error: "RuntimeError: bad" }, { file: "e", note: "no_face" },
      ],
    });
  });

  test("a scorer that could not answer is not_scored with its reason", () => {
    const identity = datasetIdentity(fail({ reason: "scorer_failed" as const, detail: "exited 1" }));
    expect(identity).toMatchObject({ scored: false, reason: "scorer_failed", notes: [] });
  });
});
