import { describe, expect, test } from "bun:test";
import { BYTE_SYMBOLS } from "../../src/tokenizers/clip-bpe.ts";
import { clipVocabularyProblems, KNOWN_CAPTIONS } from "../../src/tokenizers/clip-vocabulary.ts";
import { CLIP_MERGES, CLIP_VOCAB } from "../support/tokenizers.ts";

const [HEADER, ...MERGE_LINES] = CLIP_MERGES.trimEnd().split("\n");
const mergesOf = (lines: string[]) => `${[HEADER, ...lines].join("\n")}\n`;

// A tokenizer of CLIP's size, consistent with itself, that is not CLIP's: the same merges in another order.
function selfConsistentOther(): { vocab: string; merges: string } {
  const lines = [...MERGE_LINES.slice(0, 1000).reverse(), ...MERGE_LINES.slice(1000)];
  const merged = lines.map((line) => line.replace(" ", ""));
  const tokens = [...BYTE_SYMBOLS, ...BYTE_SYMBOLS.map((s) => `${s}</w>`), ...merged, "<|startoftext|>", "<|endoftext|>"];
  return { vocab: JSON.stringify(Object.fromEntries(tokens.map((t, id) => [t, id]))), merges: mergesOf(lines) };
}

describe("CLIP's vocabulary as CLIPTokenizer reads it", () => {
  test("CLIP's own vocab.json and merges.txt pass", () => {
    expect(MERGE_LINES).toHaveLength(48894);
    expect(Object.keys(JSON.parse(CLIP_VOCAB))).toHaveLength(49408);
    expect(clipVocabularyProblems(CLIP_VOCAB, CLIP_MERGES)).toEqual([]);
  });

  test("a merges.txt cut short, at a line or in the middle of one, is refused with its count", () => {
    expect(clipVocabularyProblems(CLIP_VOCAB, mergesOf(MERGE_LINES.slice(0, 30000)))).toEqual([
      "merges.txt holds 30000 merges after its #version line, not CLIP's 48894 (cut short?)",
    ]);
    expect(clipVocabularyProblems(CLIP_VOCAB, CLIP_MERGES.slice(0, 300_000))).toEqual([
      "merges.txt holds 29418 merges after its #version line, not CLIP's 48894 (cut short?)",
    ]);
  });

  test("an empty merges.txt, or one without its #version line, is refused", () => {
    const lost = "merges.txt does not begin with its #version line, so its first merge is lost";
    expect(clipVocabularyProblems(CLIP_VOCAB, "")).toEqual([lost]);
    expect(clipVocabularyProblems(CLIP_VOCAB, `${MERGE_LINES.join("\n")}\n`)).toEqual([lost]);
  });

  test("lines past CLIP's 48894 merges are not read by the tokenizer, so they change nothing", () => {
    expect(clipVocabularyProblems(CLIP_VOCAB, mergesOf([...MERGE_LINES, "x y"]))).toEqual([]);
  });

  test("the #version line may be written as open_clip writes it, since the tokenizer drops it unread", () => {
    const openClip = `"bpe_simple_vocab_16e6.txt#version: 0.2\n${MERGE_LINES.join("\n")}\n`;
    expect(clipVocabularyProblems(CLIP_VOCAB, openClip)).toEqual([]);
  });

  test("a merge that is not two symbols is named by its line", () => {
    const lines = [...MERGE_LINES];
    lines[9] = "t h e";
    expect(clipVocabularyProblems(CLIP_VOCAB, mergesOf(lines))).toEqual(['merges.txt line 11 is not one merge "a b"']);
  });

  test("two merges swapped, or a vocabulary short of a token, disagree at the first token out of place", () => {
    const lines = [...MERGE_LINES];
    [lines[4], lines[5]] = [lines[5]!, lines[4]!];
    expect(clipVocabularyProblems(CLIP_VOCAB, mergesOf(lines))).toEqual([
      `vocab.json and merges.txt disagree: "${lines[4]!.replace(" ", "")}" should be id 516, vocab.json has it as 517`,
    ]);
    const vocab = JSON.parse(CLIP_VOCAB);
    delete vocab["photo</w>"];
    expect(clipVocabularyProblems(JSON.stringify(vocab), CLIP_MERGES)).toEqual(["vocab.json maps 49407 tokens, not CLIP's 49408"]);
    vocab["photo</w>!"] = 1125;
    expect(clipVocabularyProblems(JSON.stringify(vocab), CLIP_MERGES)).toEqual([
      'vocab.json and merges.txt disagree: "photo</w>" should be id 1125, vocab.json lacks it',
    ]);
  });

  test("a vocabulary of CLIP's size that agrees with its merges but is not CLIP's tokenizes the known captions otherwise", () => {
    const other = selfConsistentOther();
    const problems = clipVocabularyProblems(other.vocab, other.merges);
    expect(problems.length).toBeGreaterThan(0);
    expect(problems.every((p) => p.startsWith("vocab.json and merges.txt tokenize "))).toBe(true);
    expect(problems[0]).toContain(`"a photo of ohwx person" as [`);
    expect(problems[0]).toEndWith(`not CLIP's [${KNOWN_CAPTIONS["a photo of ohwx person"]!.join(", ")}]`);
  });

  test("vocab.json that is not a JSON object of integer ids is refused before anything else", () => {
    expect(clipVocabularyProblems("[]", CLIP_MERGES)).toEqual(["vocab.json is not a JSON object of ids"]);
    expect(clipVocabularyProblems('{"a": "1"}', CLIP_MERGES)).toEqual(["vocab.json maps a token to something other than an integer id"]);
    expect(clipVocabularyProblems(CLIP_VOCAB.slice(0, 1000), CLIP_MERGES)).toEqual(["vocab.json is not JSON"]);
  });
});
