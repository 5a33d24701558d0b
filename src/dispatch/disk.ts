import { statfsSync } from "node:fs";
import { dirname } from "node:path";
import { loraBytes, outputPeakBytes, stateBytes, type Tier } from "../tiers.ts";
import { statOrNull } from "../fs.ts";

export interface DiskShortfall {
  detail: string;
  output_dir: string;
  free_bytes: number;
  needed_bytes: number;
}

const GIB = 1024 ** 3;

// Admission for the output filesystem: a run that cannot write its states and LoRAs would fail hours in with
// disk_full. A resume already has its predecessor's newest state and intermediate LoRA on that filesystem.
export function diskShortfall(outputDir: string, tier: Tier, resumed: boolean): DiskShortfall | null {
  const existing = nearestExisting(outputDir);
  const fs = statfsSync(existing);
  const free = fs.bavail * fs.bsize;
  const needed = outputPeakBytes(tier) - (resumed ? stateBytes(tier) + loraBytes(tier) : 0);
  if (free >= needed) return null;
  const gib = (bytes: number) => `${(bytes / GIB).toFixed(2)} GiB`;
  const what = `its final LoRA, the newest saved state and intermediate LoRA and the next ones while they are saved`;
  return {
    detail: `the filesystem of ${outputDir} has ${gib(free)} free; this run needs ${gib(needed)} for ${what}`,
    output_dir: outputDir,
    free_bytes: free,
    needed_bytes: needed,
  };
}

// The output dir is created at launch; until then its filesystem is its nearest existing ancestor's.
function nearestExisting(path: string): string {
  let at = path;
  while (!statOrNull(at)?.isDirectory() && dirname(at) !== at) at = dirname(at);
  return at;
}
