import type { DeviceRow } from "./device-rows.ts";
import type { ProcessRow } from "./process-rows.ts";
import type { GpuDevice } from "./types.ts";

/** Devices in PCI bus order (what CUDA_DEVICE_ORDER=PCI_BUS_ID numbers by), each with its processes by UUID. */
export function joinDevices(devices: readonly DeviceRow[], processes: readonly ProcessRow[]): GpuDevice[] {
  return [...devices].sort(byBusId).map((row) => toDevice(row, processes.filter((process) => process.gpu_uuid === row.uuid)));
}

function byBusId(a: DeviceRow, b: DeviceRow): number {
  // Bus ids are fixed-width hex, so text order is bus order once the case agrees.
  const [left, right] = [a.bus_id.toUpperCase(), b.bus_id.toUpperCase()];
  return left < right ? -1 : left > right ? 1 : a.index - b.index;
}

function toDevice(row: DeviceRow, processes: readonly ProcessRow[]): GpuDevice {
  return {
    index: row.index,
    name: row.name,
    uuid: row.uuid,
    memory_total_mib: row.memory_total_mib,
    memory_used_mib: row.memory_used_mib,
    memory_free_mib: row.memory_free_mib,
    utilization_pct: row.utilization_pct,
    processes: processes.map(({ pid, name, used_mib }) => ({ pid, name, used_mib })),
  };
}
