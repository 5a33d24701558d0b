/** Where a client command writes; the entry point binds it to stdout and stderr. */
export interface Terminal {
  write(text: string): void;
  error(text: string): void;
  /** stdout is a terminal: live redraws with `\r` are allowed. */
  isTTY: boolean;
  columns: number;
}

export const DEFAULT_COLUMNS = 80;

// Trainer output shown on a terminal must not move the cursor or set colours; a pipe gets it unchanged.
export function printable(text: string): string {
  return text.replace(/[\x00-\x08\x0b-\x1f\x7f]/g, (c) => `^${String.fromCharCode(c.charCodeAt(0) ^ 0x40)}`);
}
