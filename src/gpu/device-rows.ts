import type { CsvLayout, CsvRecord } from "./csv-records.ts";
import { parseQuantity, parseWholeNumber } from "./quantity.ts";
import type { GpuDevice } from "./types.ts";

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
