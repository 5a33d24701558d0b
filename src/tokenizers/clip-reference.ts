// CLIP's BPE, the one both tokenizers sd-scripts loads hold (openai/clip-vit-large-patch14 and
// laion/CLIP-ViT-bigG-14-laion2B-39B-b160k ship the same vocab.json and merges.txt; they differ in their configs
// alone), pinned by digest: a tokenizer is CLIP's when its merges and its vocabulary are CLIP's exactly. A tokenizer
// consistent with itself is not enough: two merges swapped, with vocab.json rebuilt to agree, tokenize most
// captions as CLIP does and a few otherwise, under a text encoder trained on CLIP's ids. The merges themselves
// (clip-merges.txt.gz: "#version: 0.2", then CLIP's 48894 merges; test/fixtures/clip/SOURCES.md says where they come
// from) are embedded in the program, to name the first line or token where a tokenizer departs from CLIP's.
import { readFileSync } from "node:fs";
import mergesFile from "./clip-merges.txt.gz" with { type: "file" };
import { BYTE_SYMBOLS, readMerges } from "./clip-bpe.ts";
import { sha256Hex } from "../fs.ts";

/** The digests a tokenizer's BPE must have (see bpeDigests). */
export interface BpePin {
  /** sha256 of its merges as CLIPTokenizer reads them: each `a b`, then a newline. */
  merges: string;
  /** sha256 of its vocab.json: each token (as JSON) and its id, space-separated, then a newline, in id order. */
  vocab: string;
}

/** CLIP's own. */
export const CLIP_BPE: BpePin = {
  merges: "d308b7377a8ceaa9707a21614fe8c831b9196e197b7aeb69833359362907af02",
  vocab: "49bd14364306b0b89f6536108abde8e38749fad3d90e15dfad3854d1e3c3719e",
};

/** A vocab.json as JSON.parse gives it. */
export type Vocab = Readonly<Record<string, number>>;

/** The digests of a tokenizer's merges (as readMerges gives them) and vocabulary, as BpePin spells them. */
export function bpeDigests(merges: readonly string[][], vocab: Vocab): BpePin {
  const byId = Object.entries(vocab).sort(([a, x], [b, y]) => x - y || (a < b ? -1 : a > b ? 1 : 0));
  return {
    merges: sha256Hex(merges.map((merge) => `${merge.join(" ")}\n`).join("")),
    vocab: sha256Hex(byId.map(([token, id]) => `${JSON.stringify(token)} ${id}\n`).join("")),
  };
}

interface Reference {
  merges: string[][];
  // CLIP's tokens in id order: the 256 byte symbols, the same with "</w>", one per merge, the two special tokens.
  tokens: string[];
}

// Read when a tokenizer differs from its pin, to say where: once.
let reference: Reference | null = null;

/** The embedded merges.txt as it is: its "#version: 0.2" line, then CLIP's merges, one "a b" a line. */
export function clipMergesText(): string {
  return new TextDecoder().decode(Bun.gunzipSync(readFileSync(mergesFile)));
}

/** CLIP's merges and tokens, from the embedded merges. */
export function clipReference(): Reference {
  if (reference !== null) return reference;
  const merges = readMerges(clipMergesText());
  const tokens = [
    ...BYTE_SYMBOLS, ...BYTE_SYMBOLS.map((symbol) => `${symbol}</w>`), ...merges.map((merge) => merge.join("")),
    "<|startoftext|>", "<|endoftext|>",
  ];
  reference = { merges, tokens };
  return reference;
}
