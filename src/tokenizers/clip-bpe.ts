// CLIP's byte-level BPE, read as transformers' CLIPTokenizer (the one sd-scripts loads) reads it: vocab.json maps
// each token to its id; merges.txt is a "#version" line, then one merge "a b" a line, of which the tokenizer takes
// the first 49152 - 256 - 2 (tokenization_clip.py: `read().strip().split("\n")[1 : 49152 - 256 - 2 + 1]`). A caption
// is lower-cased, split by CLIP's pattern, each piece's UTF-8 bytes spelt in BYTE_SYMBOLS with "</w>" on the last,
// merged by rank, and each merged symbol looked up in the vocabulary.

import { ftfyFixed } from "./ftfy-fixes.ts";

/** How many merges CLIPTokenizer reads from merges.txt, at most: its vocabulary less bytes, bytes</w>, 2 specials. */
export const MERGES_READ = 49152 - 256 - 2;

/** CLIP's printable stand-in for each byte (GPT-2's bytes_to_unicode), in the order of ids 0-255. */
export const BYTE_SYMBOLS: readonly string[] = byteSymbols().map(([, symbol]) => symbol);
/** The same, looked up by the byte's value. */
export const SYMBOL_OF_BYTE: readonly string[] = byteSymbols().sort(([a], [b]) => a - b).map(([, symbol]) => symbol);

const WORD_END = "</w>";
// CLIPTokenizer's pattern (its special tokens are split off before it and captions hold none).
const PIECE = /'s|'t|'re|'ve|'m|'ll|'d|\p{L}+|\p{N}|[^\s\p{L}\p{N}]+/giu;

// [byte, symbol] in id order: the printable bytes stand for themselves, the others for 256, 257, … in byte order.
function byteSymbols(): [number, string][] {
  const printable = (from: string, to: string) =>
    Array.from({ length: to.charCodeAt(0) - from.charCodeAt(0) + 1 }, (_, i) => from.charCodeAt(0) + i);
  const kept = [...printable("!", "~"), ...printable("¡", "¬"), ...printable("®", "ÿ")];
  const rest = Array.from({ length: 256 }, (_, b) => b).filter((b) => !kept.includes(b));
  return [
    ...kept.map((b): [number, string] => [b, String.fromCharCode(b)]),
    ...rest.map((b, i): [number, string] => [b, String.fromCharCode(256 + i)]),
  ];
}

/** The merges as CLIPTokenizer takes them: past merges.txt's first line, at most MERGES_READ, each split on space. */
export function readMerges(text: string): string[][] {
  return text.trim().split("\n").slice(1, MERGES_READ + 1).map((line) => line.trim().split(/\s+/));
}

/** The merge ranks CLIPTokenizer uses: "a b" -> its line's index. */
export function mergeRanks(merges: readonly string[][]): Map<string, number> {
  return new Map(merges.map((merge, rank) => [merge.join(" "), rank]));
}

/**
 * A caption as CLIPTokenizer reads it before it splits it (`whitespace_clean(fix_text(text)).lower()`): ftfy, which
 * it runs where it is installed (sd-scripts' venv), fixes it (ftfy-fixes.ts: "ǆ" is "dž", "ﬁ" "fi", "&amp;" "&",
 * "’" "'", fullwidth letters plain ones, controls gone, NFC); whitespace runs become one space; and Python's
 * str.lower lowercases it - a plain lowercase mapping, which JavaScript's toLowerCase shares, not Unicode case
 * folding: "ſ" (U+017F) is lowercase already and stays itself, where folding would make it "s".
 */
export function asClipReads(caption: string): ClipReading {
  return ftfyFixed(caption).split(/\s+/).filter(Boolean).join(" ").toLowerCase() as ClipReading;
}

/**
 * A caption as asClipReads gives it, which a count counts: read once, since reading a reading again can differ (a
 * prefix of a line holding "<" no longer holds it, and ftfy decodes HTML only in a line without one).
 */
export type ClipReading = string & { readonly clipReading: unique symbol };

/** The merges as a count reads them: ranks, and the longest token any merge makes, in bytes. */
export interface ClipBpe {
  ranks: ReadonlyMap<string, number>;
  longestToken: number;
}

export function clipBpe(merges: readonly string[][]): ClipBpe {
  // Each symbol of a merge is one byte's stand-in; "</w>" marks a word's end and is no byte.
  const bytes = (merge: readonly string[]) => merge.join("").replace(WORD_END, "").length;
  return { ranks: mergeRanks(merges), longestToken: merges.reduce((most, m) => Math.max(most, bytes(m)), 1) };
}

/**
 * How many tokens a caption becomes, counted as far as `most`: exact up to it, `most + 1` for any caption longer.
 * A piece so long that even tokens of the longest kind would pass `most` is not merged at all; so the work is
 * bounded by `most` whatever the caption holds.
 */
export function countTokens(read: ClipReading, bpe: ClipBpe, most: number): number {
  let count = 0;
  for (const [piece] of read.matchAll(PIECE)) {
    const bytes = new TextEncoder().encode(piece);
    if (count + Math.ceil(bytes.length / bpe.longestToken) > most) return most + 1;
    count += mergeWord([...bytes].map((b) => SYMBOL_OF_BYTE[b]!), bpe.ranks).length;
    if (count > most) return most + 1;
  }
  return count;
}

/** The merged symbols a caption becomes, one a token: as many as the trainer's text encoders read of it. */
export function captionSymbols(caption: string, ranks: ReadonlyMap<string, number>): string[] {
  return (asClipReads(caption).match(PIECE) ?? []).flatMap((piece) =>
    mergeWord([...new TextEncoder().encode(piece)].map((b) => SYMBOL_OF_BYTE[b]!), ranks));
}

// BPE of one word, as CLIPTokenizer's bpe() merges it: the lowest-ranked adjacent pair first, its occurrences left
// to right. Its loop rescans the whole word for every merge, quadratic in a word's length (a 64,000-letter word
// took 20 s); here the pairs wait in a heap by (rank, position) over a linked list of symbols, so a word costs
// n log n. The order is the same: a merge of CLIP's is learned after the merges that made its halves, so a pair a
// merge creates never outranks the pair just merged, and the heap takes every occurrence of that pair, left to
// right, before any newer pair - the pass the loop makes. Tokens that disagree surface as the recorded counts.
function mergeWord(symbols: string[], ranks: ReadonlyMap<string, number>): string[] {
  const word = [...symbols.slice(0, -1), `${symbols.at(-1)}${WORD_END}`];
  const next = word.map((_, i) => (i + 1 < word.length ? i + 1 : -1));
  const prev = word.map((_, i) => i - 1);
  const heap = new PairHeap();
  const offer = (i: number) => {
    const j = next[i]!;
    const rank = j < 0 ? undefined : ranks.get(`${word[i]} ${word[j]}`);
    if (rank !== undefined) heap.push(rank, i);
  };
  for (let i = 0; i < word.length - 1; i++) offer(i);
  for (let top = heap.pop(); top !== null; top = heap.pop()) {
    const [rank, i] = top;
    const j = next[i]!;
    // A pair merged away, or changed by a merge beside it since it was offered: its rank no longer holds.
    if (word[i] === "" || j < 0 || ranks.get(`${word[i]} ${word[j]}`) !== rank) continue;
    word[i] += word[j]!;
    word[j] = "";
    next[i] = next[j]!;
    if (next[i]! >= 0) prev[next[i]!] = i;
    if (prev[i]! >= 0) offer(prev[i]!);
    offer(i);
  }
  return word.filter((symbol) => symbol !== "");
}

// A binary min-heap of (rank, position) pairs, lowest rank first and, within a rank, leftmost first.
class PairHeap {
  private readonly items: [number, number][] = [];

  push(rank: number, at: number): void {
    const items = this.items;
    items.push([rank, at]);
    for (let i = items.length - 1; i > 0;) {
      const parent = (i - 1) >> 1;
      if (!before(items[i]!, items[parent]!)) break;
      [items[i], items[parent]] = [items[parent]!, items[i]!];
      i = parent;
    }
  }

  pop(): [number, number] | null {
    const items = this.items;
    const top = items[0];
    if (top === undefined) return null;
    const last = items.pop()!;
    if (items.length > 0) {
      items[0] = last;
      for (let i = 0; ;) {
        const [l, r] = [2 * i + 1, 2 * i + 2];
        let least = i;
        if (l < items.length && before(items[l]!, items[least]!)) least = l;
        if (r < items.length && before(items[r]!, items[least]!)) least = r;
        if (least === i) break;
        [items[i], items[least]] = [items[least]!, items[i]!];
        i = least;
      }
    }
    return top;
  }
}

function before(a: [number, number], b: [number, number]): boolean {
  return a[0] < b[0] || (a[0] === b[0] && a[1] < b[1]);
}
