import { BYTE_SYMBOLS, encodeCaption, MERGES_READ, mergeRanks, readMerges } from "./clip-bpe.ts";
import type { NamedToken } from "./named-tokens.ts";

// CLIP's vocabulary is built, in id order, from the 256 byte symbols, the same with "</w>", one token per merge
// (its two halves joined) and the two special tokens; the text encoders embed exactly this many ids.
const VOCAB_SIZE = 49408;
const BYTES = BYTE_SYMBOLS.length;
const FIRST_MERGE_ID = 2 * BYTES;
const SPECIAL_IDS: Readonly<Record<string, number>> = { "<|startoftext|>": 49406, "<|endoftext|>": 49407 };

/** Captions and the ids CLIP's own tokenizer gives them (transformers' CLIPTokenizer and open_clip's agree). */
export const KNOWN_CAPTIONS: Readonly<Record<string, readonly number[]>> = {
  "a photo of ohwx person": [320, 1125, 539, 47993, 2533],
  "close-up portrait of sks woman, soft light, 85mm":
    [2660, 268, 705, 5352, 539, 48136, 2308, 267, 3773, 1395, 267, 279, 276, 2848],
  "Candid photo: the dog's tail in a café": [19206, 1125, 281, 518, 1929, 568, 4132, 530, 320, 15304],
};

type Vocab = Record<string, number>;

/**
 * What keeps vocab.json and merges.txt from being CLIP's tokenizer as the trainer reads them, with the tokens the
 * folder names besides (named-tokens.ts: each must be in vocab.json, at its id where one is given); none when they are.
 */
export function clipVocabularyProblems(
  vocabText: string, mergesText: string, named: readonly NamedToken[] = [],
): string[] {
  const vocab = parseVocab(vocabText);
  if (typeof vocab === "string") return [`vocab.json ${vocab}`];
  const merges = readMerges(mergesText);
  const problems = mergesProblems(mergesText, merges);
  if (problems.length > 0) return problems;
  const disagreement = [...agreementProblems(vocab, merges), ...namedProblems(vocab, named)];
  return disagreement.length > 0 ? disagreement : captionProblems(vocab, merges);
}

function parseVocab(text: string): Vocab | string {
  let vocab: unknown;
  try {
    vocab = JSON.parse(text);
  } catch {
    return "is not JSON";
  }
  if (typeof vocab !== "object" || vocab === null || Array.isArray(vocab)) return "is not a JSON object of ids";
  const entries = Object.entries(vocab);
  if (!entries.every(([, id]) => Number.isInteger(id))) return "maps a token to something other than an integer id";
  if (entries.length !== VOCAB_SIZE) return `maps ${entries.length} tokens, not CLIP's ${VOCAB_SIZE}`;
  return vocab as Vocab;
}

// CLIPTokenizer drops the first line unread (a "#version" line, however it is written: open_clip's begins with
// `"bpe_simple_vocab_16e6.txt#version`) and reads no more than MERGES_READ: a short file is a cut one.
function mergesProblems(text: string, merges: string[][]): string[] {
  if (!text.trim().split("\n", 1)[0]!.includes("#version")) {
    return ["merges.txt does not begin with its #version line, so its first merge is lost"];
  }
  if (merges.length !== MERGES_READ) {
    return [`merges.txt holds ${merges.length} merges after its #version line, not CLIP's ${MERGES_READ} (cut short?)`];
  }
  const bad = merges.findIndex((merge) => merge.length !== 2);
  return bad < 0 ? [] : [`merges.txt line ${bad + 2} is not one merge "a b"`];
}

// The vocabulary must be exactly CLIP's construction over these merges, each token at its id.
function agreementProblems(vocab: Vocab, merges: string[][]): string[] {
  const expected: [string, number][] = [
    ...BYTE_SYMBOLS.map((symbol, id): [string, number] => [symbol, id]),
    ...BYTE_SYMBOLS.map((symbol, id): [string, number] => [`${symbol}</w>`, BYTES + id]),
    ...merges.map((merge, i): [string, number] => [merge.join(""), FIRST_MERGE_ID + i]),
    ...Object.entries(SPECIAL_IDS),
  ];
  const wrong = expected.find(([token, id]) => !Object.hasOwn(vocab, token) || vocab[token] !== id);
  if (wrong === undefined) return [];
  const [token, id] = wrong;
  const has = Object.hasOwn(vocab, token) ? `has it as ${vocab[token]}` : "lacks it";
  return [`vocab.json and merges.txt disagree: ${JSON.stringify(token)} should be id ${id}, vocab.json ${has}`];
}

function namedProblems(vocab: Vocab, named: readonly NamedToken[]): string[] {
  return named.flatMap(({ token, id, file }) => {
    const quoted = JSON.stringify(token);
    if (!Object.hasOwn(vocab, token)) return [`${file} names the token ${quoted}, which vocab.json lacks`];
    if (id !== null && vocab[token] !== id) return [`${file} gives ${quoted} the id ${id}, vocab.json ${vocab[token]}`];
    return [];
  });
}

function captionProblems(vocab: Vocab, merges: string[][]): string[] {
  const ranks = mergeRanks(merges);
  return Object.entries(KNOWN_CAPTIONS).flatMap(([caption, want]) => {
    const got = encodeCaption(caption, vocab, ranks);
    if ("ids" in got && got.ids.join() === want.join()) return [];
    const gave = "ids" in got ? `[${got.ids.join(", ")}]` : `a symbol it lacks, ${JSON.stringify(got.unknown)}`;
    const clip = `not CLIP's [${want.join(", ")}]`;
    return [`vocab.json and merges.txt tokenize ${JSON.stringify(caption)} as ${gave}, ${clip}`];
  });
}
