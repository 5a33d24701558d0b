import { UsageError } from "../../args.ts";
import { jsonText } from "../format.ts";
import { clusterLines, gpuTable } from "../table.ts";
import type { ClientCommand } from "../command.ts";
import { EXIT } from "../exit.ts";

export const gpu: ClientCommand = {
  help: `Shows the worker's GPUs as nvidia-smi sees them: one row a device with a VRAM bar, its processes under
it (a co-tenant such as a TTS server marked [co-tenant], the worker's own trainer [training]), then the
co-tenants; on a narrow terminal names, bars and columns are shortened or left out to fit. A worker on the Slurm
backend shows the cluster's nodes instead, one line each with its GPUs by type. --json: the /gpu-status answer.
Exit: 0; 5 when the worker cannot read the GPUs (503 gpu_probe_failed, with what nvidia-smi said).`,
  values: [],
  flags: ["json"],
  async run({ client, out, options }) {
    if (options.positional.length > 0) throw new UsageError("gpu takes no arguments");
    const status = await client.gpu();
    const json = options.flags.has("json");
    const lines = "nodes" in status ? clusterLines(status, out.columns) : gpuTable(status, out.columns);
    out.write(json ? `${jsonText(status)}\n` : lines.map((l) => `${l}\n`).join(""));
    return EXIT.ok;
  },
};
