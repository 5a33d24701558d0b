import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { clipTokenCounter, tokensAtMost } from "../../src/dataset/clip-tokens.ts";
import { REPO } from "../support/host-tree.ts";

// CLIP's merges.txt, as the tokenizers sd-scripts loads hold it (test/fixtures/clip/SOURCES.md).
const MERGES = join(REPO, "test/fixtures/clip/merges.txt.gz");
// Each caption's token count by transformers' CLIPTokenizer over those merges (test/fixtures/real/SOURCES.md).
const COUNTS: Array<{ caption: string; tokens: number }> = JSON.parse(
  readFileSync(join(REPO, "test/fixtures/real/clip-token-counts-1.json"), "utf8"),
);

const realMerges = () => new TextDecoder().decode(Bun.gunzipSync(readFileSync(MERGES)));

describe("a caption's CLIP tokens, counted as the trainer's tokenizer counts them", () => {
  const count = clipTokenCounter(realMerges());

  test("each recorded caption counts what transformers' CLIPTokenizer counted", () => {
    expect(COUNTS.map(({ caption }) => ({ caption, tokens: count(caption) }))).toEqual(COUNTS);
  });

  test("the bound never counts fewer tokens than the tokenizer", () => {
    for (const { caption, tokens } of COUNTS) expect(tokensAtMost(caption)).toBeGreaterThanOrEqual(tokens);
  });

  test("contrast: without the merges every byte is a token, and the long captions would be counted wrong", () => {
    const bare = clipTokenCounter("#version: 0.2\n");
    const wrong = COUNTS.filter(({ caption, tokens }) => bare(caption) !== tokens);
    expect(wrong.length).toBeGreaterThan(COUNTS.length / 2);
  });
});
