/**
 * nvidia-smi's CSV: values joined by ", ", never quoted, one row per line. A comma inside a value cannot be told
 * from a separator, so one free-text field per query is recoverable: every other field is taken from the two ends
 * of the line and whatever is left in between is that field.
 */
export type CsvRecord = Readonly<Record<string, string>>;

export interface CsvLayout {
  fields: readonly string[];
  /** The one field that may contain commas. */
  freeField?: string;
}

export type RowsResult<T> = { ok: true; rows: T[] } | { ok: false; line: string };

/** A line as a record keyed by field name, or undefined when its value count does not fit the layout. */
export function splitCsvLine(line: string, layout: CsvLayout): CsvRecord | undefined {
  const parts = line.split(",");
  const extra = parts.length - layout.fields.length;
  const freeAt = layout.freeField === undefined ? -1 : layout.fields.indexOf(layout.freeField);
  if (extra < 0 || (extra > 0 && freeAt < 0)) return undefined;
  const values =
    extra === 0 ? parts : [...parts.slice(0, freeAt), parts.slice(freeAt, freeAt + extra + 1).join(","), ...parts.slice(freeAt + extra + 1)];
  return Object.fromEntries(layout.fields.map((field, i) => [field, (values[i] ?? "").trim()]));
}

/** Every line through `toRow`; stops at the first line that does not split or that `toRow` rejects. */
export function parseCsvRows<T>(lines: readonly string[], layout: CsvLayout, toRow: (record: CsvRecord) => T | undefined): RowsResult<T> {
  const rows: T[] = [];
  for (const line of lines) {
    const record = splitCsvLine(line, layout);
    const row = record === undefined ? undefined : toRow(record);
    if (row === undefined) return { ok: false, line };
    rows.push(row);
  }
  return { ok: true, rows };
}

/** Rows of `--format=csv,noheader`, whose values come in the order of the query's fields. */
export function parseHeaderless<T>(text: string, layout: CsvLayout, toRow: (record: CsvRecord) => T | undefined): RowsResult<T> {
  return parseCsvRows(nonEmptyLines(text), layout, toRow);
}

/** Rows of `--format=csv`, whose header names the fields (`used_gpu_memory [MiB]` names `used_gpu_memory`). */
export function parseWithHeader<T>(
  text: string,
  freeField: string | undefined,
  toRow: (record: CsvRecord) => T | undefined,
): RowsResult<T> {
  const [header = "", ...body] = nonEmptyLines(text);
  const fields = header.split(",").map((name) => name.trim().replace(/\s*\[[^\]]*\]$/, ""));
  return parseCsvRows(body, { fields, freeField }, toRow);
}

/** The lines of `text` that hold something besides whitespace. */
export function nonEmptyLines(text: string): string[] {
  return text.split(/\r?\n/).filter((line) => line.trim() !== "");
}
