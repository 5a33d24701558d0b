import { meter } from "./meter.ts";
import type { GpuDeviceView, GpuProcessView, GpuStatus } from "./wire.ts";

const BAR_WIDTH = 20;
const ROLE_LABEL: Record<GpuProcessView["role"], string> = { cotenant: "  [co-tenant]", training: "  [training: this worker's job]", other: "" };

/** `gpu` for a person: one row a device with a VRAM bar, its processes under it, co-tenants marked. */
export function gpuTable(status: GpuStatus): string[] {
  const nameWidth = Math.max(4, ...status.devices.map((d) => d.name.length));
  const header = `GPU  ${"NAME".padEnd(nameWidth)}  ${"VRAM USED".padEnd(BAR_WIDTH)}  ${"USED / TOTAL".padStart(19)}  ${"FREE".padStart(9)}  UTIL`;
  const rows = status.devices.flatMap((d) => [deviceRow(d, nameWidth), ...d.processes.map(processRow)]);
  return [header, ...rows, cotenantLine(status)];
}

function deviceRow(d: GpuDeviceView, nameWidth: number): string {
  const used = d.memory_used_mib;
  const total = d.memory_total_mib;
  const bar = used !== null && total ? meter(used / total, BAR_WIDTH) : "?".padEnd(BAR_WIDTH);
  const amounts = `${mib(used, 6)} / ${mib(total, 6)} MiB`;
  const util = d.utilization_pct === null ? "?" : `${d.utilization_pct}%`;
  return `${String(d.index).padEnd(3)}  ${d.name.padEnd(nameWidth)}  ${bar}  ${amounts.padStart(19)}  ${`${mib(d.memory_free_mib, 0)} MiB`.padStart(9)}  ${util}`;
}

function processRow(p: GpuProcessView): string {
  return `       pid ${String(p.pid).padEnd(8)} ${`${mib(p.used_mib, 0)} MiB`.padStart(10)}  ${p.name}${ROLE_LABEL[p.role]}`;
}

function cotenantLine(status: GpuStatus): string {
  if (status.cotenants.length === 0) return "co-tenants: none";
  const list = status.cotenants.map((c) => `${c.name} (pid ${c.pid}, ${mib(c.used_mib, 0)} MiB) on GPU ${c.device_index}`).join("; ");
  return `co-tenants: ${list}${status.tts_on_3090 ? " — tts_on_3090: training on the 24 GB card competes with it" : ""}`;
}

function mib(value: number | null, width: number): string {
  return (value === null ? "?" : String(value)).padStart(width);
}
