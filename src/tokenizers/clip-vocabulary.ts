import { MERGES_READ, readMerges } from "./clip-bpe.ts";
import { bpeDigests, type BpePin, clipReference, type Vocab } from "./clip-reference.ts";
import type { NamedToken } from "./named-tokens.ts";

// CLIP's vocabulary: 256 byte symbols, the same with "</w>", one token per merge and the two special tokens; the text
// encoders embed exactly this many ids.
const VOCAB_SIZE = 49408;

/** Captions and the ids CLIP's own tokenizer gives them (transformers' CLIPTokenizer and open_clip's agree). */
export const KNOWN_CAPTIONS: Readonly<Record<string, readonly number[]>> = {
  "a photo of ohwx person": [320, 1125, 539, 47993, 2533],
  "close-up portrait of sks woman, soft light, 85mm":
    [2660, 268, 705, 5352, 539, 48136, 2308, 267, 3773, 1395, 267, 279, 276, 2848],
  "Candid photo: the dog's tail in a café": [19206, 1125, 281, 518, 1929, 568, 4132, 530, 320, 15304],
};

/**
 * What keeps vocab.json and merges.txt from being CLIP's tokenizer exactly (`pin`: the digests its id's BPE must have,
 * clip-reference.ts), with the tokens the folder names besides (named-tokens.ts: each must be in vocab.json, at its id
 * where one is given); none when they are. A departure from CLIP's is named where it first occurs.
 */
export function clipVocabularyProblems(
  vocabText: string, mergesText: string, pin: BpePin, named: readonly NamedToken[] = [],
): string[] {
  const vocab = parseVocab(vocabText);
  if (typeof vocab === "string") return [`vocab.json ${vocab}`];
  const merges = readMerges(mergesText);
  const problems = mergesProblems(mergesText, merges);
  if (problems.length > 0) return problems;
  const digests = bpeDigests(merges, vocab);
  if (digests.merges !== pin.merges) return [mergesDeparture(merges, digests.merges, pin.merges)];
  if (digests.vocab !== pin.vocab) return [vocabDeparture(vocab, digests.vocab, pin.vocab)];
  return namedProblems(vocab, named);
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

// The first merge (by its line: the #version line is line 1) that is not CLIP's. Only where the embedded merges are
// not what the pin says (a tokenizer id pinned to another BPE) is there no line to name: the digests are.
function mergesDeparture(merges: string[][], got: string, pinned: string): string {
  const clip = clipReference().merges;
  const at = merges.findIndex((merge, i) => merge.join(" ") !== clip[i]?.join(" "));
  if (at < 0) return `merges.txt is not CLIP's: its merges' sha256 is ${got}, not ${pinned}`;
  const quote = (merge: readonly string[]) => JSON.stringify(merge.join(" "));
  return `merges.txt line ${at + 2}: ${quote(merges[at]!)} where CLIP has ${quote(clip[at]!)}`;
}

// The first of CLIP's tokens, in id order, that vocab.json lacks or gives another id. vocab.json holds as many tokens
// as CLIP's, so one of CLIP's is out of place wherever it is not CLIP's.
function vocabDeparture(vocab: Vocab, got: string, pinned: string): string {
  const tokens = clipReference().tokens;
  const id = tokens.findIndex((token, i) => !Object.hasOwn(vocab, token) || vocab[token] !== i);
  if (id < 0) return `vocab.json is not CLIP's: its sha256 (in id order) is ${got}, not ${pinned}`;
  const token = JSON.stringify(tokens[id]);
  if (!Object.hasOwn(vocab, tokens[id]!)) return `vocab.json lacks ${token}, which CLIP has as id ${id}`;
  return `vocab.json: ${token} has id ${vocab[tokens[id]!]} where CLIP has ${id}`;
}

function namedProblems(vocab: Vocab, named: readonly NamedToken[]): string[] {
  return named.flatMap(({ token, id, file }) => {
    const quoted = JSON.stringify(token);
    if (!Object.hasOwn(vocab, token)) return [`${file} names the token ${quoted}, which vocab.json lacks`];
    if (id !== null && vocab[token] !== id) return [`${file} gives ${quoted} the id ${id}, vocab.json ${vocab[token]}`];
    return [];
  });
}
