import { type CsvLayout, type CsvRecord, nonEmptyLines, parseCsvRows, type RowsResult, splitCsvLine } from "./csv-records.ts";
import { rejoinRows } from "./process-lines.ts";
import { parseQuantity, parseWholeNumber } from "./quantity.ts";
import type { GpuProcess } from "./types.ts";

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
