import { statSync } from "node:fs";
import { join } from "node:path";
import type { Config } from "../../../config/schema.ts";
import { type DoctorCheck, failed, passed, type Relax, warned } from "../../../doctor/doctor.ts";
import { createGpuProbe } from "../../../gpu/probe.ts";

/** What `lora-worker doctor` checks of this host's GPUs: nvidia-smi sees the configured devices, CUDA's node exists. */
export async function localChecks(config: Config, devDir: string, relax: Relax): Promise<DoctorCheck[]> {
  return [await checkNvidiaSmi(config), relax(uvmNode(devDir), "the simulated trainer uses no CUDA")];
}

async function checkNvidiaSmi(config: Config): Promise<DoctorCheck> {
  const name = "nvidia-smi";
  const probe = createGpuProbe({ nvidiaSmi: config.gpu.nvidia_smi, timeoutMs: config.gpu.probe_timeout_ms, ttlMs: 0 });
  const result = await probe.read({ fresh: true });
  if (!result.ok) {
    const fix = "run nvidia-smi by hand; fix the driver, or point gpu.nvidia_smi at it";
    return failed(name, `${config.gpu.nvidia_smi} failed: ${result.error}`, fix);
  }
  const missing = config.devices.filter((d) => !result.value.some((g) => g.index === d.index));
  if (missing.length > 0) {
    const seen = result.value.map((g) => `${g.index} ${g.name}`).join(", ") || "none";
    const names = missing.map((d) => `device ${d.index} (${d.name})`).join(", ");
    const fix = "fix [[devices]] in the config to match nvidia-smi's indexes";
    return failed(name, `${names} not seen by nvidia-smi (it sees: ${seen})`, fix);
  }
  const nameOf = (index: number) => result.value.find((g) => g.index === index)!.name;
  const seen = config.devices.map((d) => `${d.index} ${nameOf(d.index)}`).join(", ");
  const renamed = config.devices.filter((d) => !nameOf(d.index).includes(d.name));
  if (renamed.length > 0) {
    const which = renamed.map((d) => `device ${d.index} is configured as "${d.name}"`).join(", ");
    const fix = "check that [[devices]] index order matches CUDA_DEVICE_ORDER=PCI_BUS_ID";
    return warned(name, `sees ${seen}, but ${which}`, fix);
  }
  return passed(name, `sees the configured devices: ${seen}`);
}

// With NoNewPrivileges the worker cannot run nvidia-modprobe (setuid) to create the node, so it must exist already.
function uvmNode(devDir: string): DoctorCheck {
  const name = "nvidia-uvm";
  const node = join(devDir, "nvidia-uvm");
  const load = "load it at boot: echo nvidia-uvm > /etc/modules-load.d/nvidia-uvm.conf, " +
    "and now: modprobe nvidia-uvm && nvidia-modprobe -u -c=0";
  try {
    const st = statSync(node);
    if (!st.isCharacterDevice()) return failed(name, `${node} is not a character device`, load);
  } catch {
    return failed(name, `${node} does not exist (CUDA needs it; the service cannot create it)`, load);
  }
  return passed(name, `${node} exists`);
}
