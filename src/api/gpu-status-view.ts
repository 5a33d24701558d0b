import type { Config } from "../config/schema.ts";
import type { GpuDevice } from "../gpu/index.ts";
import { liveGroupMembers } from "../supervisor/process-group.ts";

// A process name matching one of these is a co-tenant (the TTS server of SPEC §1).
export const COTENANT_PATTERNS = [/tts/i];
const CLASS_OF_3090 = "24gb";

type Role = "training" | "cotenant" | "other";

export function gpuStatusView(devices: GpuDevice[], config: Config, trainerPgid: number | null) {
  const ours = new Set(trainerPgid === null ? [] : liveGroupMembers(trainerPgid));
  const view = devices.map((d) => ({
    ...d,
    processes: d.processes.map((p) => ({ ...p, role: roleOf(p.pid, p.name, ours) })),
  }));
  const cotenants = view.flatMap((d) => d.processes.filter((p) => p.role === "cotenant").map((p) => ({ device_index: d.index, pid: p.pid, name: p.name, used_mib: p.used_mib })));
  const index3090 = config.devices.find((d) => d.class === CLASS_OF_3090)?.index;
  return {
    devices: view,
    cotenants,
    tts_on_3090: cotenants.some((c) => c.device_index === index3090),
  };
}

function roleOf(pid: number, name: string, ours: Set<number>): Role {
  if (ours.has(pid)) return "training";
  return COTENANT_PATTERNS.some((p) => p.test(name)) ? "cotenant" : "other";
}
