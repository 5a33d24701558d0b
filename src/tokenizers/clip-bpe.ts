// CLIP's byte-level BPE, read as transformers' CLIPTokenizer (the one sd-scripts loads) reads it: vocab.json maps
// each token to its id; merges.txt is a "#version" line, then one merge "a b" a line, of which the tokenizer takes
// the first 49152 - 256 - 2 (tokenization_clip.py: `read().strip().split("\n")[1 : 49152 - 256 - 2 + 1]`). A caption
// is lower-cased, split by CLIP's pattern, each piece's UTF-8 bytes spelt in BYTE_SYMBOLS with "</w>" on the last,
// merged by rank, and each merged symbol looked up in the vocabulary.

/** How many merges CLIPTokenizer reads from merges.txt, at most: its vocabulary less bytes, bytes</w>, 2 specials. */
export const MERGES_READ = 49152 - 256 - 2;

/** CLIP's printable stand-in for each byte (GPT-2's bytes_to_unicode), in the order of ids 0-255. */
export const BYTE_SYMBOLS: readonly string[] = byteSymbols().map(([, symbol]) => symbol);
// The same, looked up by the byte's value.
const SYMBOL_OF_BYTE: readonly string[] = byteSymbols().sort(([a], [b]) => a - b).map(([, symbol]) => symbol);

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

/** The merged symbols a caption becomes, one a token: as many as the trainer's text encoders read of it. */
export function captionSymbols(caption: string, ranks: ReadonlyMap<string, number>): string[] {
  // ftfy, which CLIPTokenizer runs first where it is installed (sd-scripts' venv), leaves text in NFC.
  const text = caption.normalize("NFC").split(/\s+/).filter(Boolean).join(" ").toLowerCase();
  return (text.match(PIECE) ?? []).flatMap((piece) =>
    mergeWord([...new TextEncoder().encode(piece)].map((b) => SYMBOL_OF_BYTE[b]!), ranks));
}

// BPE of one word: merge the lowest-ranked adjacent pair everywhere it occurs, until no pair has a rank.
function mergeWord(symbols: string[], ranks: ReadonlyMap<string, number>): string[] {
  let word = [...symbols.slice(0, -1), `${symbols.at(-1)}${WORD_END}`];
  for (;;) {
    const best = lowestPair(word, ranks);
    if (best === null) return word;
    const merged: string[] = [];
    for (let i = 0; i < word.length; i++) {
      if (word[i] === best[0] && word[i + 1] === best[1] && i < word.length - 1) merged.push(best[0] + word[++i]!);
      else merged.push(word[i]!);
    }
    word = merged;
  }
}

function lowestPair(word: string[], ranks: ReadonlyMap<string, number>): [string, string] | null {
  let best: [string, string] | null = null;
  let bestRank = Infinity;
  for (let i = 0; i < word.length - 1; i++) {
    const rank = ranks.get(`${word[i]} ${word[i + 1]}`);
    if (rank !== undefined && rank < bestRank) [best, bestRank] = [[word[i]!, word[i + 1]!], rank];
  }
  return best;
}
