import { nonEmptyLines, parseCsvRows, type CsvRecord } from "../../src/gpu/nvidia-smi.ts";
import type { Result } from "../../src/result.ts";

// Rows of `--format=csv`, whose header names the fields (`used_gpu_memory [MiB]` names `used_gpu_memory`): the worker
// queries without a header, so only the tests read real captures that carry one.
export function parseWithHeader<T>(
  text: string,
  freeField: string | undefined,
  toRow: (record: CsvRecord) => T | undefined,
): Result<T[]> {
  const [header = "", ...body] = nonEmptyLines(text);
  const fields = header.split(",").map((name) => name.trim().replace(/\s*\[[^\]]*\]$/, ""));
  return parseCsvRows(body, { fields, freeField }, toRow);
}
