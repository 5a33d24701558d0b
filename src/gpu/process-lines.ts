/**
 * nvidia-smi prints a process name as the process set it, newlines included (any local user can name a process so),
 * which spreads one compute-apps row over several lines. A row starts with the GPU's UUID and the pid; a line that
 * does not, or that comes while the row before still lacks its memory field, continues the row before.
 * The newline stays in the name as the two characters `\n`: visible to an operator, yet one line in tables, logs
 * and refusal details, where a raw newline would forge a line. A name's own text cannot be told from a row that
 * starts with a real UUID and pid after a complete-looking line, so such a name can still add a row; it cannot
 * make the probe fail.
 */
export const NAME_NEWLINE = "\\n";

// `GPU-<hex and dashes>`; MIG instances appear as `MIG-…` on drivers that list them apart.
const ROW_START = /^(?:GPU|MIG)-[\w/-]+, \d+, /;

/** The output's lines regrouped into one line per row, continuations joined with NAME_NEWLINE. */
export function rejoinRows(lines: readonly string[], isWholeRow: (line: string) => boolean): string[] {
  const rows: string[] = [];
  for (const line of lines) {
    const last = rows.at(-1);
    if (last === undefined || (ROW_START.test(line) && isWholeRow(last))) rows.push(line);
    else rows[rows.length - 1] = `${last}${NAME_NEWLINE}${line}`;
  }
  return rows;
}
