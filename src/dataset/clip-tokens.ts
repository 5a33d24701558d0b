import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";

// How many tokens CLIP's tokenizer makes of a caption, as transformers' CLIPTokenizer does with ftfy installed
// (sd-scripts' requirements have it): whitespace collapsed, lowercased, split by CLIP's pattern, each piece's
// UTF-8 bytes mapped to characters and merged by byte-pair rank, its last character marked "</w>". Only the count
// is wanted, so no ids are looked up. ftfy's repairs of broken text (mojibake, ligatures) are not made: they only
// ever shorten a caption.

/** The pieces CLIP's tokenizer splits a cleaned caption into (CLIPTokenizer's `pat`). */
const PIECES = /<\|startoftext\|>|<\|endoftext\|>|'s|'t|'re|'ve|'m|'ll|'d|[\p{L}]+|[\p{N}]|[^\s\p{L}\p{N}]+/giu;
// CLIPTokenizer reads only the first 49152 - 256 - 2 merges after merges.txt's "#version" line.
const MERGES_READ = 49152 - 256 - 2;

/** Counts a caption's tokens, BOS and EOS not included. */
export type TokenCounter = (caption: string) => number;

/** CLIP-L's counter from its merges.txt (the two SDXL tokenizers share their BPE and split alike). */
export function clipTokenCounter(merges: string): TokenCounter {
  const ranks = new Map<string, number>();
  const lines = merges.trim().split("\n").slice(1, MERGES_READ + 1);
  lines.forEach((line, rank) => ranks.set(line.trimEnd(), rank));
  const encode = byteEncoder();
  const cache = new Map<string, number>();
  const piece = (text: string) => {
    let n = cache.get(text);
    if (n === undefined) {
      const chars = [...new TextEncoder().encode(text)].map((b) => encode[b]!);
      n = bpe(chars, ranks);
      cache.set(text, n);
    }
    return n;
  };
  return (caption) => {
    const cleaned = caption.normalize("NFC").replace(/\s+/g, " ").trim().toLowerCase();
    let total = 0;
    for (const [match] of cleaned.matchAll(PIECES)) total += piece(match);
    return total;
  };
}

/** A counter and how it counts, for the record. */
export interface CaptionTokens {
  count: TokenCounter;
  by: "clip tokenizer" | "upper bound";
}

/**
 * The CLIP tokenizer's count where its merges.txt is in `folder` (as `tokenizers import` lays it: the trainer
 * cannot run without it); else, as in simulate mode without tokenizers, the bound below.
 */
export function captionTokens(folder: string): CaptionTokens {
  const merges = join(folder, "merges.txt");
  if (!existsSync(merges)) return { count: tokensAtMost, by: "upper bound" };
  return { count: clipTokenCounter(readFileSync(merges, "utf8")), by: "clip tokenizer" };
}

/**
 * A count that is never below CLIP's, for when no tokenizer is on disk: every piece's tokens are each at least
 * one UTF-8 byte of it, and every character but whitespace is in some piece.
 */
export const tokensAtMost: TokenCounter = (caption) =>
  new TextEncoder().encode(caption.toLowerCase().replace(/\s+/g, "")).length;

// Merge the adjacent pair of lowest rank, everywhere it occurs, until no pair has a rank.
function bpe(chars: string[], ranks: Map<string, number>): number {
  if (chars.length === 0) return 0;
  let word = [...chars.slice(0, -1), `${chars.at(-1)}</w>`];
  for (;;) {
    let best: string | null = null;
    let bestRank = Infinity;
    for (let i = 0; i + 1 < word.length; i++) {
      const rank = ranks.get(`${word[i]} ${word[i + 1]}`);
      if (rank !== undefined && rank < bestRank) [best, bestRank] = [`${word[i]} ${word[i + 1]}`, rank];
    }
    if (best === null) return word.length;
    const [a, b] = best.split(" ") as [string, string];
    const merged: string[] = [];
    for (let i = 0; i < word.length; i++) {
      if (word[i] === a && word[i + 1] === b) {
        merged.push(a + b);
        i += 1;
      } else merged.push(word[i]!);
    }
    word = merged;
  }
}

// GPT-2's byte-to-character table, which CLIP shares: printable bytes stand for themselves, the rest for 256 + n.
function byteEncoder(): string[] {
  const printable = (b: number) => (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
  const table: string[] = [];
  let n = 0;
  for (let b = 0; b < 256; b++) table[b] = String.fromCharCode(printable(b) ? b : 256 + n++);
  return table;
}
