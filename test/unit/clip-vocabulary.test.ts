import { describe, expect, test } from "bun:test";
import { captionSymbols, mergeRanks, readMerges } from "../../src/tokenizers/clip-bpe.ts";
import { bpeDigests, CLIP_BPE, clipReference } from "../../src/tokenizers/clip-reference.ts";
import { clipVocabularyProblems, KNOWN_CAPTIONS } from "../../src/tokenizers/clip-vocabulary.ts";
import { TOKENIZERS } from "../../src/tokenizers/layout.ts";
import { CLIP_MERGES, CLIP_VOCAB, swappedMerges, vocabFor } from "../support/tokenizers.ts";

const [HEADER, ...MERGE_LINES] = CLIP_MERGES.trimEnd().split("\n");
const mergesOf = (lines: string[]) => `${[HEADER, ...lines].join("\n")}\n`;
const check = (vocab: string, merges: string) => clipVocabularyProblems(vocab, merges, CLIP_BPE);

// The ids these files give a caption, as CLIPTokenizer would (captionSymbols, each looked up in the vocabulary).
function idsOf(vocabText: string, mergesText: string, caption: string): number[] {
  const vocab = JSON.parse(vocabText);
  return captionSymbols(caption, mergeRanks(readMerges(mergesText))).map((symbol) => vocab[symbol]);
}

describe("CLIP's vocabulary as CLIPTokenizer reads it", () => {
  test("CLIP's own vocab.json and merges.txt pass", () => {
    expect(MERGE_LINES).toHaveLength(48894);
    expect(Object.keys(JSON.parse(CLIP_VOCAB))).toHaveLength(49408);
    expect(check(CLIP_VOCAB, CLIP_MERGES)).toEqual([]);
  });

  test("a merges.txt cut short, at a line or in the middle of one, is refused with its count", () => {
    expect(check(CLIP_VOCAB, mergesOf(MERGE_LINES.slice(0, 30000)))).toEqual([
      "merges.txt holds 30000 merges after its #version line, not CLIP's 48894 (cut short?)",
    ]);
    expect(check(CLIP_VOCAB, CLIP_MERGES.slice(0, 300_000))).toEqual([
      "merges.txt holds 29418 merges after its #version line, not CLIP's 48894 (cut short?)",
    ]);
  });

  test("an empty merges.txt, or one without its #version line, is refused", () => {
    const lost = "merges.txt does not begin with its #version line, so its first merge is lost";
    expect(check(CLIP_VOCAB, "")).toEqual([lost]);
    expect(check(CLIP_VOCAB, `${MERGE_LINES.join("\n")}\n`)).toEqual([lost]);
  });

  test("lines past CLIP's 48894 merges are not read by the tokenizer, so they change nothing", () => {
    expect(check(CLIP_VOCAB, mergesOf([...MERGE_LINES, "x y"]))).toEqual([]);
  });

  test("the #version line may be written as open_clip writes it, since the tokenizer drops it unread", () => {
    const openClip = `"bpe_simple_vocab_16e6.txt#version: 0.2\n${MERGE_LINES.join("\n")}\n`;
    expect(check(CLIP_VOCAB, openClip)).toEqual([]);
  });

  test("a merge that is not two symbols is named by its line", () => {
    const lines = [...MERGE_LINES];
    lines[9] = "t h e";
    expect(check(CLIP_VOCAB, mergesOf(lines))).toEqual(['merges.txt line 11 is not one merge "a b"']);
  });

  test("two merges swapped, with vocab.json rebuilt to agree, are refused at the first line that is not CLIP's", () => {
    const swapped = swappedMerges(40001);
    // Consistent with itself and tokenizing the known captions as CLIP does: what a check of agreement accepted.
    for (const [caption, ids] of Object.entries(KNOWN_CAPTIONS)) {
      expect(idsOf(swapped.vocab, swapped.merges, caption)).toEqual([...ids]);
    }
    expect(check(swapped.vocab, swapped.merges)).toEqual([
      `merges.txt line 40002: ${JSON.stringify(MERGE_LINES[40001])} where CLIP has ${JSON.stringify(MERGE_LINES[40000])}`,
    ]);
    // Contrast: CLIP's own order, the vocabulary built the same way.
    expect(check(vocabFor(mergesOf(MERGE_LINES)), mergesOf(MERGE_LINES))).toEqual([]);
  });

  test("a vocabulary built from another order of CLIP's merges is refused at its first merge", () => {
    const lines = [...MERGE_LINES.slice(0, 1000).reverse(), ...MERGE_LINES.slice(1000)];
    expect(check(vocabFor(mergesOf(lines)), mergesOf(lines))).toEqual([
      `merges.txt line 2: ${JSON.stringify(MERGE_LINES[999])} where CLIP has ${JSON.stringify(MERGE_LINES[0])}`,
    ]);
  });

  test("CLIP's merges with a vocab.json that is not CLIP's name the first token out of place, or missing", () => {
    const vocab = JSON.parse(CLIP_VOCAB);
    [vocab["photo</w>"], vocab["person</w>"]] = [vocab["person</w>"], vocab["photo</w>"]];
    expect(check(JSON.stringify(vocab), CLIP_MERGES)).toEqual(['vocab.json: "photo</w>" has id 2533 where CLIP has 1125']);
    const short = JSON.parse(CLIP_VOCAB);
    delete short["photo</w>"];
    expect(check(JSON.stringify(short), CLIP_MERGES)).toEqual(["vocab.json maps 49407 tokens, not CLIP's 49408"]);
    short["photo</w>!"] = 1125;
    expect(check(JSON.stringify(short), CLIP_MERGES)).toEqual(['vocab.json lacks "photo</w>", which CLIP has as id 1125']);
  });

  test("both tokenizer ids are pinned to CLIP's BPE: the digests of the merges the program embeds, and its vocabulary", () => {
    const clip = clipReference();
    expect(clip.merges.map((merge) => merge.join(" "))).toEqual(MERGE_LINES);
    const vocab = Object.fromEntries(clip.tokens.map((token, id) => [token, id]));
    expect(JSON.stringify(vocab)).toBe(CLIP_VOCAB);
    expect(bpeDigests(clip.merges, vocab)).toEqual(CLIP_BPE);
    expect(TOKENIZERS.map((t) => t.bpe)).toEqual([CLIP_BPE, CLIP_BPE]);
  });

  test("CLIP's files tokenize the known captions to the ids CLIP's own tokenizer gives them", () => {
    for (const [caption, ids] of Object.entries(KNOWN_CAPTIONS)) {
      expect(idsOf(CLIP_VOCAB, CLIP_MERGES, caption)).toEqual([...ids]);
    }
  });

  test("vocab.json that is not a JSON object of integer ids is refused before anything else", () => {
    expect(check("[]", CLIP_MERGES)).toEqual(["vocab.json is not a JSON object of ids"]);
    expect(check('{"a": "1"}', CLIP_MERGES)).toEqual(["vocab.json maps a token to something other than an integer id"]);
    expect(check(CLIP_VOCAB.slice(0, 1000), CLIP_MERGES)).toEqual(["vocab.json is not JSON"]);
  });
});
