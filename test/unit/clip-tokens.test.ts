import { describe, expect, test } from "bun:test";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { clipTokenCounter, tokensAtMost } from "../../src/dataset/clip-tokens.ts";
import { REPO } from "../support/host-tree.ts";

// CLIP's merges as OpenCLIP's wheel ships them (scripts/setup.sh --test-tools fetches it), laid out as the HF
// tokenizer's merges.txt is: a "#version" line, then the merges.
const BPE = join(REPO, "test/.cache/open_clip/bpe_simple_vocab_16e6.txt.gz");
// Each caption's token count by transformers' CLIPTokenizer over those merges (test/fixtures/real/SOURCES.md).
const COUNTS: Array<{ caption: string; tokens: number }> = JSON.parse(
  readFileSync(join(REPO, "test/fixtures/real/clip-token-counts-1.json"), "utf8"),
);

function realMerges(): string {
  if (!existsSync(BPE)) throw new Error(`${BPE} is missing: run bash scripts/setup.sh --test-tools`);
  const lines = new TextDecoder().decode(Bun.gunzipSync(readFileSync(BPE))).split("\n");
  return ["#version: 0.2", ...lines.slice(1)].join("\n");
}

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
