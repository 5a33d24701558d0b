import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { clipTokenCounter, TOKENS_COUNTED, tokensAtMost } from "../../src/dataset/clip-tokens.ts";
import {
  asClipReads, captionSymbols, clipBpe, countTokens, mergeRanks, readMerges, SYMBOL_OF_BYTE,
} from "../../src/tokenizers/clip-bpe.ts";
import { REPO } from "../support/host-tree.ts";

// CLIP's merges.txt, as the tokenizers sd-scripts loads hold it (test/fixtures/clip/SOURCES.md).
const MERGES = join(REPO, "test/fixtures/clip/merges.txt.gz");
// Each caption's token count by transformers' CLIPTokenizer over those merges (test/fixtures/real/SOURCES.md).
const COUNTS: Array<{ caption: string; tokens: number }> = JSON.parse(
  readFileSync(join(REPO, "test/fixtures/real/clip-token-counts-1.json"), "utf8"),
);

const realMerges = () => new TextDecoder().decode(Bun.gunzipSync(readFileSync(MERGES)));
// Counting stops past the longest context sd-scripts trains: a longer caption counts one more than that.
const PAST = TOKENS_COUNTED + 1;
const counted = (tokens: number) => Math.min(tokens, PAST);

// CLIPTokenizer.bpe's own loop, word by word (tokenization_clip.py): find the lowest-ranked adjacent pair, merge
// each of its occurrences left to right, again until no pair has a rank. Quadratic, so only short words.
function loopBpe(word: string[], ranks: ReadonlyMap<string, number>): string[] {
  for (;;) {
    const pairs = word.slice(0, -1).map((a, i) => `${a} ${word[i + 1]}`).filter((pair) => ranks.has(pair));
    if (pairs.length === 0) return word;
    const lowest = pairs.reduce((a, b) => (ranks.get(a)! <= ranks.get(b)! ? a : b));
    const [first, second] = lowest.split(" ");
    const merged: string[] = [];
    for (let i = 0; i < word.length; i++) {
      if (word[i] === first && word[i + 1] === second && i < word.length - 1) merged.push(first! + word[++i]!);
      else merged.push(word[i]!);
    }
    word = merged;
  }
}

describe("a caption's CLIP tokens, counted as the trainer's tokenizer counts them", () => {
  const counter = clipTokenCounter(realMerges());
  const count = (caption: string) => counter(asClipReads(caption));

  test("each recorded caption counts what transformers' CLIPTokenizer counted", () => {
    const expected = COUNTS.map(({ caption, tokens }) => ({ caption, tokens: counted(tokens) }));
    expect(COUNTS.map(({ caption }) => ({ caption, tokens: count(caption) }))).toEqual(expected);
    // The recorded captions include one past the count: it is counted as past, not as its 349.
    expect(COUNTS.some(({ tokens }) => tokens > PAST)).toBe(true);
  });

  test("a caption is counted exactly up to the longest context the trainer reads, and past it as one more", () => {
    const words = (n: number) => Array.from({ length: n }, () => "a").join(" ");
    expect([count(words(TOKENS_COUNTED - 1)), count(words(TOKENS_COUNTED)), count(words(TOKENS_COUNTED + 1))])
      .toEqual([TOKENS_COUNTED - 1, TOKENS_COUNTED, PAST]);
    expect(count(words(5000))).toBe(PAST);
    // One word far longer than any count: its length alone puts it past, and so does one just past the bound.
    expect(count("x".repeat(64_000))).toBe(PAST);
    expect(count(`ohwx ${"ab".repeat(300)}`)).toBe(PAST);
  });

  test("the merges are made in CLIPTokenizer's order: every word splits into the tokens its own loop makes", () => {
    const merges = readMerges(realMerges());
    const ranks = mergeRanks(merges);
    const bpe = clipBpe(merges);
    const letters = [..."abcdefghijklmnopqrstuvwxyz  eeaoo,.!'é😂0123456789"];
    let seed = 7;
    const random = () => (seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31) / 2 ** 31;
    const caption = (n: number) => Array.from({ length: n }, () => letters[Math.floor(random() * letters.length)]).join("");
    const captions = [...Array.from({ length: 400 }, () => caption(1 + Math.floor(random() * 80))), "aaaaaaaaaaaaa"];
    const bytes = (piece: string) => [...new TextEncoder().encode(piece)];
    for (const text of captions) {
      const pieces = text.toLowerCase().match(/'s|'t|'re|'ve|'m|'ll|'d|\p{L}+|\p{N}|[^\s\p{L}\p{N}]+/gu) ?? [];
      const looped = pieces.flatMap((piece) => {
        const symbols = bytes(piece).map((b) => SYMBOL_OF_BYTE[b]!);
        return loopBpe([...symbols.slice(0, -1), `${symbols.at(-1)}</w>`], ranks);
      });
      expect({ text, tokens: captionSymbols(text, ranks) }).toEqual({ text, tokens: looped });
      expect(countTokens(asClipReads(text), bpe, TOKENS_COUNTED)).toBe(counted(looped.length));
    }
  });

  test("the bound never counts fewer tokens than the tokenizer", () => {
    for (const { caption, tokens } of COUNTS) expect(tokensAtMost(asClipReads(caption))).toBeGreaterThanOrEqual(counted(tokens));
  });

  test("contrast: without the merges every byte is a token, and the long captions would be counted wrong", () => {
    const bare = clipTokenCounter("#version: 0.2\n");
    const wrong = COUNTS.filter(({ caption, tokens }) => bare(asClipReads(caption)) !== tokens);
    expect(wrong.length).toBeGreaterThan(COUNTS.length / 2);
  });
});
