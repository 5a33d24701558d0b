const FULL = "█";
const EMPTY = "░";
const PARTIAL = ["", "▏", "▎", "▍", "▌", "▋", "▊", "▉"];

/** A bar of `width` cells filled to `fraction` (0–1), in eighths of a cell. */
export function meter(fraction: number, width: number): string {
  const eighths = Math.round(Math.min(Math.max(fraction, 0), 1) * width * 8);
  const full = Math.floor(eighths / 8);
  const part = PARTIAL[eighths % 8]!;
  return FULL.repeat(full) + part + EMPTY.repeat(width - full - (part ? 1 : 0));
}
