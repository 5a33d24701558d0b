import { describe, expect, test } from "bun:test";
import { datasetReportView } from "../../src/api/dataset-view.ts";
import { datasetRows } from "../../src/cli/client/dataset-rows.ts";
import type { JobView } from "../../src/cli/client/worker-client.ts";
import type { DatasetReport } from "../../src/job.ts";

// What `lora-worker status` prints of a dataset report as the worker sends it (each note with its sentence): today's,
// and one an older worker recorded.
const OLDER = {
  captions: { trigger_added: 1, trigger_present: 0, images_without_caption: 0, cut: [], tokens_counted_by: "clip tokenizer" },
  turned_upright: [],
  small: [{ image: "a.png", width: 8, height: 8 }],
  duplicates: [],
};
const viewOf = (report: object) => {
  const prepared = datasetReportView(report as DatasetReport);
  return { dataset: { files: 2, bytes: 10, sha256: "0".repeat(64), prepared } } as unknown as JobView;
};

describe("the dataset rows of lora-worker status", () => {
  test("name the context and why, the moved triggers, the warnings, each small image's scale and every listed file", () => {
    const rows = datasetRows(viewOf({
      ...OLDER,
      captions: { ...OLDER.captions, trigger_moved: 1, cut: [{ caption: "b.txt", tokens: 226 }] },
      token_window: { tokens: 225, longest: { caption: "b.txt", tokens: 226 } },
      small: [{ image: "a.png", width: 8, height: 8, scale: 96 }],
      files: [
        { file: "a.png", did: "small", scale: 96 },
        { file: "b.txt", did: "trigger_moved", prefix: "ohwx person, " },
      ],
      files_not_listed: 3,
      warnings: ["the folder says otherwise"],
    }));
    expect(rows).toEqual([
      ["captions", "trigger added to 1 caption, already in 0, moved in front in 1, 0 images without one"],
      ["context", "225 tokens (--max_token_length=225): the longest caption, b.txt, has more than 225"],
      ["warning", "the folder says otherwise"],
      ["small", "a.png (8x8, scaled 96x)"],
      ["cut", "b.txt: more than 225 tokens, more than the text encoders read"],
      ["files", "a.png: small: scaled up 96x"],
      ["", 'b.txt: trigger past the context (225 tokens): "ohwx person, " in front'],
      ["", "and 3 more"],
    ]);
  });

  test("contrast: an older worker's report, without them, prints only what it holds", () => {
    expect(datasetRows(viewOf(OLDER))).toEqual([
      ["captions", "trigger added to 1 caption, already in 0, 0 images without one"],
      ["small", "a.png (8x8)"],
    ]);
  });
});

describe("the faces rows of lora-worker status", () => {
  const identity = {
    scored: true, reason: null, photos: { one_face: 4, no_face: 1, several_faces: 1 }, spread: 0.41, threshold: 0.6,
    notes: [
      { file: "c.png", note: "no_face" }, { file: "d.png", note: "several_faces", faces: 2 },
      { file: "e.jpg", note: "other_person", distance: 0.81, threshold: 0.6 },
    ],
  };

  test("count the photos by faces, give the spread, and name each noted photo", () => {
    expect(datasetRows(viewOf({ ...OLDER, identity })).slice(2)).toEqual([
      ["faces", "4 photos with one face, 1 with none, 1 with several; spread 0.41 (a match is at most 0.6)"],
      ["", "c.png: no face"], ["", "d.png: 2 faces"], ["", "e.jpg: someone else: 0.81 from the others' face, past 0.6"],
    ]);
  });

  test("say why a dataset was not scored; a report without identity prints no faces row (the contrast)", () => {
    const unscored = { ...identity, scored: false, reason: "too_few_single_faces", spread: null, notes: [] };
    expect(datasetRows(viewOf({ ...OLDER, identity: unscored })).at(-1)).toEqual([
      "faces", "not scored: fewer than half the photos show one face (a pet, a product, a style?); 4 photos with one face, 1 with none, 1 with several",
    ]);
    expect(datasetRows(viewOf(OLDER)).some(([label]) => label === "faces")).toBe(false);
  });
});
