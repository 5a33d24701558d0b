import { printable } from "./terminal.ts";

// Tables fitted to a terminal's width. A layout is one way to show a row, and a table lists them widest
// first: the first layout in which every row fits is used for all rows, so its cells line up. After the
// cells a row may have a tail: text cut with "…" (or dropped) to leave room for an optional suffix. Into a
// pipe the width is unbounded and the first layout is always the one used.

export interface RowCells {
  cells: string[];
  tail?: { text: string; suffix?: string };
}

export type Layout<Row> = (row: Row) => RowCells;

const GAP = "  ";
const ELLIPSIS = "…";
/** A tail cut shorter than this says too little: it is dropped instead. */
const MIN_TAIL = 8;

/** What `text` takes on a terminal, where control characters are shown in caret notation. */
export const widthOf = (text: string): number => Bun.stringWidth(printable(text));

export function fitTable<Row>(rows: readonly Row[], layouts: readonly Layout<Row>[], columns: number): string[] {
  for (const layout of layouts) {
    const lines = rows.map((row) => fitRow(layout(row), columns));
    if (lines.every((line) => line !== null)) return lines as string[];
  }
  const narrowest = layouts.at(-1)!;
  return rows.map((row) => cut(joined(narrowest(row)), columns));
}

// The row whole, else with its tail cut or dropped; null when the cells and suffix alone are too wide.
function fitRow(row: RowCells, columns: number): string | null {
  const whole = joined(row);
  if (widthOf(whole) <= columns) return whole;
  if (!row.tail) return null;
  const head = row.cells.join(GAP);
  const suffix = row.tail.suffix ? `${GAP}${row.tail.suffix}` : "";
  const room = columns - widthOf(head) - GAP.length - widthOf(suffix);
  if (room >= MIN_TAIL) return `${head}${GAP}${cut(row.tail.text, room)}${suffix}`;
  const without = `${head}${suffix}`;
  return widthOf(without) <= columns ? without : null;
}

function joined(row: RowCells): string {
  const tail = row.tail ? [row.tail.text, ...(row.tail.suffix ? [row.tail.suffix] : [])] : [];
  return [...row.cells, ...tail].join(GAP);
}

/** `text` in at most `columns` cells, ending in "…" when cut; cut text is shown as the terminal would show it. */
export function cut(text: string, columns: number): string {
  if (widthOf(text) <= columns) return text;
  let kept = "";
  for (const char of printable(text)) {
    if (Bun.stringWidth(kept + char) > columns - 1) break;
    kept += char;
  }
  return kept + ELLIPSIS;
}

/** Prose in lines of at most `columns` cells, broken between words; a word wider than a line is cut. */
export function wrapWords(text: string, columns: number, indent = "  "): string[] {
  if (widthOf(text) <= columns) return [text];
  const lines: string[] = [];
  let line = "";
  for (const word of text.split(" ")) {
    const next = line === "" ? word : `${line} ${word}`;
    if (line !== "" && widthOf(next) > columns) {
      lines.push(line);
      line = `${indent}${word}`;
    } else {
      line = next;
    }
  }
  return [...lines, line].map((l) => cut(l, columns));
}
