import { statSync } from "node:fs";
import { join } from "node:path";
import type { Config } from "../config/schema.ts";
import { createGpuProbe } from "../gpu/probe.ts";
import { fail, ok, warn, type CheckResult } from "./check-result.ts";

export async function checkNvidiaSmi(config: Config): Promise<CheckResult> {
  const name = "nvidia-smi";
  const probe = createGpuProbe({ nvidiaSmi: config.gpu.nvidia_smi, timeoutMs: config.gpu.probe_timeout_ms, ttlMs: 0 });
  const result = await probe.read({ fresh: true });
  if (!result.ok) {
    return fail(name, `${config.gpu.nvidia_smi} failed: ${result.detail}`, "run nvidia-smi by hand; fix the driver, or point gpu.nvidia_smi at it");
  }
  const missing = config.devices.filter((d) => !result.devices.some((g) => g.index === d.index));
  if (missing.length > 0) {
    const seen = result.devices.map((g) => `${g.index} ${g.name}`).join(", ") || "none";
    const names = missing.map((d) => `device ${d.index} (${d.name})`).join(", ");
    return fail(name, `${names} not seen by nvidia-smi (it sees: ${seen})`, "fix [[devices]] in the config to match nvidia-smi's indexes");
  }
  const seen = config.devices.map((d) => `${d.index} ${result.devices.find((g) => g.index === d.index)!.name}`).join(", ");
  const renamed = config.devices.filter((d) => !result.devices.find((g) => g.index === d.index)!.name.includes(d.name));
  if (renamed.length > 0) {
    const which = renamed.map((d) => `device ${d.index} is configured as "${d.name}"`).join(", ");
    return warn(name, `sees ${seen}, but ${which}`, "check that [[devices]] index order matches CUDA_DEVICE_ORDER=PCI_BUS_ID");
  }
  return ok(name, `sees the configured devices: ${seen}`);
}

/** With NoNewPrivileges the worker cannot run nvidia-modprobe (setuid) to create the node, so it must exist already. */
export function checkNvidiaUvm(devDir: string): CheckResult {
  const name = "nvidia-uvm";
  const node = join(devDir, "nvidia-uvm");
  const load = "load it at boot: echo nvidia-uvm > /etc/modules-load.d/nvidia-uvm.conf, and now: modprobe nvidia-uvm && nvidia-modprobe -u -c=0";
  try {
    const st = statSync(node);
    if (!st.isCharacterDevice()) return fail(name, `${node} is not a character device`, load);
  } catch {
    return fail(name, `${node} does not exist (CUDA needs it; the service cannot create it)`, load);
  }
  return ok(name, `${node} exists`);
}
