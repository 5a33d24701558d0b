import { describe, expect, test } from "bun:test";
import { tokenWindowFor } from "../../src/dataset/token-window.ts";
import { trainedWindow } from "../../src/recipe/command.ts";

describe("the context a caption is trained on", () => {
  test("is the smallest of sd-scripts' three that holds it, and 225 past them all", () => {
    const chosen = [0, 1, 75, 76, 150, 151, 225, 226, 1000].map((tokens) => [tokens, tokenWindowFor(tokens)]);
    expect(chosen).toEqual([[0, 75], [1, 75], [75, 75], [76, 150], [150, 150], [151, 225], [225, 225], [226, 225], [1000, 225]]);
  });

  test("a job's runs train on its report's choice; one prepared before the choice existed trained on 225", () => {
    const report = { token_window: { tokens: 75 as const, longest: null } };
    expect(trainedWindow(report as never)).toBe(75);
    // Contrast: the same report without the choice, as an older worker recorded it, and no report at all.
    expect(trainedWindow({} as never)).toBe(225);
    expect(trainedWindow(null)).toBe(225);
  });
});
