import type { TokenWindow } from "../job.ts";

// The contexts sd-scripts can train a caption on (train_util's --max_token_length choices: none, 150, 225): one CLIP
// window of 75 tokens, two or three. Every caption is padded to the whole context (strategy_base.py,
// padding="max_length"), so a context longer than the captions trains the LoRA on padding that a prompt of 75
// tokens or fewer never has at inference (sd-scripts issue #2256).
export const TOKEN_WINDOWS: readonly TokenWindow[] = [75, 150, 225];

/** The smallest context that holds a caption of `longest` tokens; 225, the most there is, past it. */
export function tokenWindowFor(longest: number): TokenWindow {
  return TOKEN_WINDOWS.find((window) => longest <= window) ?? 225;
}
