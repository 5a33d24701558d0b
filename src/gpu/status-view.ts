import type { Config } from "../config/schema.ts";
import { readProcStat } from "../os/proc.ts";
import { cotenantsOf } from "./admission.ts";
import type { GpuDevice } from "./probe.ts";

// GET /gpu-status on this host: each device's processes with their role (the training, a co-tenant, another), the
// co-tenants, and whether one holds the 24 GB card.
type Role = "training" | "cotenant" | "other";

// `tts_on_3090` is kept for arbo's client: a co-tenant on the device of the 24 GB class.
const CLASS_OF_3090 = "24gb";

// Only the few processes nvidia-smi lists are looked up: no scan of /proc on every request.
export function gpuStatusView(devices: GpuDevice[], config: Config, trainerPgid: number | null) {
  const pids = devices.flatMap((d) => d.processes.map((p) => p.pid));
  const ours = new Set(trainerPgid === null ? [] : pids.filter((pid) => readProcStat(pid)?.pgrp === trainerPgid));
  const cotenants = devices.flatMap((d) => {
    return cotenantsOf(d, config.gpu.cotenant_patterns).filter((c) => !ours.has(c.pid));
  });
  const cotenantPids = new Set(cotenants.map((c) => c.pid));
  const roleOf = (pid: number): Role => (ours.has(pid) ? "training" : cotenantPids.has(pid) ? "cotenant" : "other");
  const index3090 = config.devices.find((d) => d.class === CLASS_OF_3090)?.index;
  return {
    devices: devices.map((d) => ({ ...d, processes: d.processes.map((p) => ({ ...p, role: roleOf(p.pid) })) })),
    cotenants,
    tts_on_3090: cotenants.some((c) => c.device_index === index3090),
  };
}
