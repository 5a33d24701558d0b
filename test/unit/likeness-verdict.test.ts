import { describe, expect, test } from "bun:test";
import type { LikenessPoint } from "../../src/job.ts";
import { judgeLikeness } from "../../src/likeness/verdict.ts";

const THRESHOLD = 0.6;
// A point from its trigger and class distances; null is a preview with no face.
const point = (step: number, trigger: number | null, klass: number | null): LikenessPoint => ({
  step,
  trigger: { distance: trigger, faces: trigger === null ? 0 : 1, files: [`t${step}.png`] },
  class: { distance: klass, faces: klass === null ? 0 : 1, files: [`c${step}.png`] },
});

describe("the verdict of a run's scored preview points", () => {
  const table: Array<[string, LikenessPoint[], string, string | null, number | null]> = [
    ["the trigger matches from the third point, the class never", [
      point(100, null, 0.9), point(200, 0.8, 0.85), point(300, 0.42, 0.8), point(400, 0.3, 0.78),
    ], "learned", null, 400],
    ["the trigger never comes under the threshold", [
      point(100, 0.9, 0.9), point(200, 0.8, 0.9), point(300, 0.7, 0.85), point(400, 0.65, 0.88),
    ], "undertrained", null, 400],
    ["no face in the trigger previews at all, faces in the class's", [
      point(100, null, 0.9), point(200, null, 0.9),
    ], "undertrained", null, null],
    ["the class previews show the person at the end", [
      point(100, 0.8, 0.9), point(200, 0.4, 0.75), point(300, 0.3, 0.55), point(400, 0.25, 0.4),
    ], "overfit", null, 200],
    ["the class matched midway and drifted back by the end", [
      point(100, 0.5, 0.9), point(200, 0.3, 0.5), point(300, 0.35, 0.7),
    ], "learned", null, 300],
    ["a distance exactly at the threshold matches, as compare_faces has it", [
      point(100, 0.6, 0.61),
    ], "learned", null, 100],
    ["no face in any preview", [point(100, null, null), point(200, null, null)], "not_scored", "no_face_in_previews", null],
    ["no points", [], "not_scored", "no_previews", null],
    ["points listed out of order are judged by step", [
      point(400, 0.3, 0.55), point(100, 0.7, 0.9),
    ], "overfit", null, 100],
    ["two points as close: the earlier is best", [point(100, 0.4, 0.9), point(200, 0.4, 0.9)], "learned", null, 100],
  ];
  for (const [name, points, verdict, reason, best] of table) {
    test(`${name}: ${verdict}${reason === null ? "" : ` (${reason})`}, best step ${best}`, () => {
      expect(judgeLikeness(points, THRESHOLD)).toEqual({ verdict, reason, best_step: best } as never);
    });
  }

  test("the threshold decides: the same points are undertrained under a stricter one", () => {
    const points = [point(100, 0.5, 0.9), point(200, 0.45, 0.9)];
    expect(judgeLikeness(points, THRESHOLD).verdict).toBe("learned");
    expect(judgeLikeness(points, 0.4).verdict).toBe("undertrained");
  });
});
