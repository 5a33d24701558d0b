import type { Config, Device } from "../config/schema.ts";
import { fail, ok, type Result } from "../result.ts";
import { type DeviceClass, type RunTier, TIERS } from "../tiers.ts";
import type { GpuDevice, ProbeResult } from "./probe.ts";

export interface Cotenant {
  device_index: number;
  pid: number;
  name: string;
  used_mib: number | null;
}

export type AdmissionRefusal =
  | {
      reason: "insufficient_vram" | "cotenant_active";
      detail: string;
      device_index: number;
      free_mib: number;
      needed_mib: number;
      cotenants: Cotenant[];
    }
  | { reason: "gpu_probe_failed"; detail: string };

// Admitted, with a warning when admission only warns; or refused.
export type Admission = Result<string | null, AdmissionRefusal>;

export function cotenantsOf(device: GpuDevice, patterns: readonly string[]): Cotenant[] {
  const regexps = patterns.map((p) => new RegExp(p, "i"));
  return device.processes
    .filter((p) => regexps.some((r) => r.test(p.name)))
    .map((p) => ({ device_index: device.index, pid: p.pid, name: p.name, used_mib: p.used_mib }));
}

// What preview sampling adds while it runs, per card class: sd-scripts builds an SDXL pipeline beside the
// training state, moves the VAE onto the card and decodes a full-size image (768 px on the 24 GB class, up to
// 1024 on the 48 GB class), and the first sample after a checkpoint is where a card that trained fine runs out
// of memory.
export const SAMPLING_VRAM_MIB: Record<DeviceClass, number> = { "24gb": 2560, "48gb": 3584 };

// Refuse now, with the numbers, rather than OOM ten minutes in (or OOM the co-tenant).
// Under "warn" the same finding is returned as a warning and the job runs.
export function judgeAdmission(
  probe: ProbeResult,
  device: Device,
  tier: RunTier,
  config: Config,
  samples = 0,
): Admission {
  const finding = refusalFor(probe, device, tier, config, samples);
  if (finding === null) return ok(null);
  if (config.gpu.admission === "warn") return ok(`admitted against advice: ${finding.detail}`);
  return fail(finding);
}

function refusalFor(
  probe: ProbeResult,
  device: Device,
  tier: RunTier,
  config: Config,
  samples: number,
): AdmissionRefusal | null {
  if (!probe.ok) return { reason: "gpu_probe_failed", detail: probe.error };
  const seen = probe.value.find((d) => d.index === device.index);
  if (!seen || seen.memory_free_mib === null) {
    return { reason: "gpu_probe_failed", detail: `nvidia-smi reports no free memory for device ${device.index}` };
  }
  const training = config.gpu.vram_need_mib[TIERS[tier].budget][device.class]!;
  const sampling = samples > 0 ? SAMPLING_VRAM_MIB[device.class] : 0;
  const needed = training + sampling;
  const free = seen.memory_free_mib;
  if (free >= needed) return null;
  const what = sampling > 0 ? ` (${training} to train and ${sampling} to take preview samples)` : "";
  const cotenants = cotenantsOf(seen, config.gpu.cotenant_patterns);
  const holders = cotenants.map((c) => `${c.name} (pid ${c.pid})`).join(", ");
  const who = cotenants.length > 0 ? ` while ${holders} holds it` : "";
  return {
    reason: cotenants.length > 0 ? "cotenant_active" : "insufficient_vram",
    detail:
      `tier "${tier}" needs ${needed} MiB${what} free on device ${device.index} (${device.name}) ` +
      `but ${free} MiB are free${who}`,
    device_index: device.index,
    free_mib: free,
    needed_mib: needed,
    cotenants,
  };
}
