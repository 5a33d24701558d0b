import type { Config } from "../../../config/schema.ts";
import { type DoctorCheck, failed, passed } from "../../../doctor/doctor.ts";
import type { SlurmClient, SlurmNode } from "./slurm-client.ts";

/** What `lora-worker doctor` checks on the Slurm backend: the cluster, not this host's GPUs. */
export async function slurmChecks(config: Config, slurm: SlurmClient): Promise<DoctorCheck[]> {
  return [
    passed("nvidia-smi", "not checked: on the Slurm backend the GPUs are the nodes', which Slurm places runs on"),
    await checkSlurm(config, slurm),
    passed("nvidia-uvm", "not checked: on the Slurm backend the trainer runs on the nodes"),
  ];
}

// On the Slurm backend: the controller answers, and every configured device's gres is on some node. That the job
// directories are on storage the nodes share cannot be seen from here: the line says so.
async function checkSlurm(config: Config, slurm: SlurmClient): Promise<DoctorCheck> {
  const name = "slurm";
  const listed = await slurm.nodes();
  if (!listed.ok) {
    const fix = "check slurm.bin_dir, SLURM_CONF and that slurmctld is up (scontrol ping)";
    return failed(name, `scontrol show node failed: ${listed.error}`, fix);
  }
  const unknown = config.devices.filter((d) => !listed.value.some((node) => offers(node, d.gres ?? "")));
  if (unknown.length > 0) {
    const names = unknown.map((d) => `device ${d.index} asks for ${d.gres}`).join(", ");
    const offered = listed.value.map((n) => n.gres).filter((g) => g !== "" && g !== "(null)").join("; ") || "no gres";
    const fix = "fix the devices' gres to a type the cluster has";
    return failed(name, `${names}, which no node offers (nodes: ${offered})`, fix);
  }
  const shared = "state_dir, handoff_root, the model roots and this binary must be at the same paths on every node " +
    "(not checkable from here)";
  return passed(name, `the controller answers and offers every device's gres; ${shared}`);
}

// "gpu:a6000:1" is offered by a node with a6000 GPUs; "gpu:1" by any node with GPUs.
function offers(node: SlurmNode, wanted: string): boolean {
  const [kind, type, count] = wanted.split(":");
  const typed = count !== undefined;
  return kind === "gpu" && node.gpus.some((g) => !typed || g.type === type);
}
