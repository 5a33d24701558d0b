import type { GpuDevice, GpuProcess } from "./probe.ts";

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

/** The lines of `text` that hold something besides whitespace. */
export function nonEmptyLines(text: string): string[] {
  return text.split(/\r?\n/).filter((line) => line.trim() !== "");
}

// nvidia-smi writes a value it cannot read as a bracketed reason ("[N/A]", "[Not Supported]") or a bare "N/A".
const UNKNOWN = /^(\[.*\]|N\/A)$/;
// Tolerates the unit nvidia-smi appends when `nounits` is left out of --format.
const NUMBER_WITH_OPTIONAL_UNIT = /^(\d+(?:\.\d+)?)\s*(?:MiB|%)?$/;

/** A MiB or % value: a number, null when nvidia-smi says it is unknown, undefined when it is not a quantity at all. */
export function parseQuantity(raw: string): number | null | undefined {
  if (UNKNOWN.test(raw)) return null;
  const match = NUMBER_WITH_OPTIONAL_UNIT.exec(raw);
  return match ? Number(match[1]) : undefined;
}

/** A whole number such as an index or a pid, or undefined. */
export function parseWholeNumber(raw: string | undefined): number | undefined {
  return raw !== undefined && /^\d+$/.test(raw) ? Number(raw) : undefined;
}

/** GPU names carry no commas in practice, but `name` is the one free field so a future one would still parse. */
export const DEVICE_QUERY: CsvLayout = {
  fields: ["index", "pci.bus_id", "uuid", "name", "memory.total", "memory.used", "memory.free", "utilization.gpu"],
  freeField: "name",
};

export interface DeviceRow extends Omit<GpuDevice, "processes"> {
  bus_id: string;
}

type DeviceNumbers = Pick<GpuDevice, "memory_total_mib" | "memory_used_mib" | "memory_free_mib" | "utilization_pct">;

/** The memory and utilization figures of a row of any query-gpu field list; a field not queried reads as unknown. */
export function readDeviceNumbers(record: CsvRecord): DeviceNumbers | undefined {
  const numbers = {
    memory_total_mib: quantityOf(record, "memory.total"),
    memory_used_mib: quantityOf(record, "memory.used"),
    memory_free_mib: quantityOf(record, "memory.free"),
    utilization_pct: quantityOf(record, "utilization.gpu"),
  };
  return allParsed(numbers) ? numbers : undefined;
}

/** A row of DEVICE_QUERY, or undefined when a required value is missing or malformed. */
export function toDeviceRow(record: CsvRecord): DeviceRow | undefined {
  const index = parseWholeNumber(record["index"]);
  const numbers = readDeviceNumbers(record);
  const { uuid, name } = record;
  const bus_id = record["pci.bus_id"];
  if (index === undefined || numbers === undefined || !uuid || !name || !bus_id) return undefined;
  return { index, name, uuid, bus_id, ...numbers };
}

function quantityOf(record: CsvRecord, field: string): number | null | undefined {
  const raw = record[field];
  return raw === undefined ? null : parseQuantity(raw);
}

function allParsed<T extends object>(values: T): values is { [K in keyof T]: Exclude<T[K], undefined> } {
  return !Object.values(values).includes(undefined);
}

/** Process names are paths or command lines and may hold commas, so `process_name` is the free field. */
export const PROCESS_QUERY: CsvLayout = {
  fields: ["gpu_uuid", "pid", "process_name", "used_gpu_memory"],
  freeField: "process_name",
};

export interface ProcessRow extends GpuProcess {
  gpu_uuid: string;
}

/** A compute-apps row of any field order that has these four fields, or undefined when one is malformed. */
export function toProcessRow(record: CsvRecord): ProcessRow | undefined {
  const pid = parseWholeNumber(record["pid"]);
  const rawUsed = record["used_gpu_memory"];
  const used_mib = rawUsed === undefined ? undefined : parseQuantity(rawUsed);
  const gpu_uuid = record["gpu_uuid"];
  const name = record["process_name"];
  if (pid === undefined || used_mib === undefined || !gpu_uuid || name === undefined) return undefined;
  return { gpu_uuid, pid, name, used_mib };
}

/** Rows of PROCESS_QUERY in `--format=csv,noheader`, a row spread over lines by a name's newlines rejoined. */
export function parseProcessRows(text: string): RowsResult<ProcessRow> {
  return parseCsvRows(rejoinRows(nonEmptyLines(text), isWholeRow), PROCESS_QUERY, toProcessRow);
}

function isWholeRow(line: string): boolean {
  const record = splitCsvLine(line, PROCESS_QUERY);
  return record !== undefined && toProcessRow(record) !== undefined;
}

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
