import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { LONGEST_WINDOW } from "../job.ts";
import { type ClipReading, clipBpe, countTokens, readMerges } from "../tokenizers/clip-bpe.ts";

// How many tokens of a caption the trainer's text encoders read: CLIP's BPE over the merges of the tokenizer the
// trainer loads, on the caption as CLIP reads it (tokenizers/clip-bpe.ts asClipReads: as transformers'
// CLIPTokenizer with ftfy, tokenizers/ftfy-fixes.ts). BOS and EOS are not counted.

/**
 * The longest context sd-scripts trains (three CLIP windows): a caption is counted this far and no further, so a
 * caption of any length costs the same bounded work.
 */
export const TOKENS_COUNTED = LONGEST_WINDOW;

/**
 * Counts a caption's tokens, read as CLIP reads it, BOS and EOS not included: exactly up to TOKENS_COUNTED, and
 * TOKENS_COUNTED + 1 for every caption longer (the trainer reads no further, so neither does the count).
 */
export type TokenCounter = (read: ClipReading) => number;

/** A counter and how it counts, for the record. */
export interface CaptionTokens {
  count: TokenCounter;
  by: "clip tokenizer" | "upper bound";
}

/** CLIP's count over `merges` (merges.txt's text; the two SDXL tokenizers share it). */
export function clipTokenCounter(merges: string): TokenCounter {
  const bpe = clipBpe(readMerges(merges));
  return (read) => countTokens(read, bpe, TOKENS_COUNTED);
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
 * one UTF-8 byte of it, and every character of the reading but its spaces is in some piece.
 */
export const tokensAtMost: TokenCounter = (read) =>
  Math.min(new TextEncoder().encode(read.replaceAll(" ", "")).length, TOKENS_COUNTED + 1);
