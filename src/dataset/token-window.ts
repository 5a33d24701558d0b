import { LONGEST_WINDOW, TOKEN_WINDOWS, type TokenWindow } from "../job.ts";

// Every caption is padded to the whole context (strategy_base.py, padding="max_length"), so a context longer than
// the captions trains the LoRA on padding that a prompt of one window never has at inference (sd-scripts issue
// #2256): the smallest that holds them is chosen.

/** The smallest context that holds a caption of `longest` tokens; LONGEST_WINDOW, the most there is, past it. */
export function tokenWindowFor(longest: number): TokenWindow {
  return TOKEN_WINDOWS.find((window) => longest <= window) ?? LONGEST_WINDOW;
}
