import { statfsSync } from "node:fs";
import { dirname } from "node:path";
import { statOrNull } from "../fs.ts";
import { loraBytes, runPeakBytes, type Tier } from "../tiers.ts";

export interface DiskShortfall {
  detail: string;
  /** The filesystem that is short: arbo's output dir (the final LoRA) or the worker's state dir (the run). */
  filesystem: "output_dir" | "state_dir";
  output_dir?: string;
  free_bytes: number;
  needed_bytes: number;
}

const GIB = 1024 ** 3;
const gib = (bytes: number) => `${(bytes / GIB).toFixed(2)} GiB`;

// Admission for both filesystems a run writes: a run that cannot write its states and LoRAs, or publish its LoRA,
// would fail hours in with disk_full. The state dir takes the dataset copy (none for a resume: its files are
// hard links) and the run directory; the output dir takes the final LoRA alone. On one filesystem both count.
export function diskShortfall(
  stateDir: string,
  outputDir: string,
  tier: Tier,
  datasetBytes: number,
): DiskShortfall | null {
  const state = statfsSync(stateDir);
  const stateFree = state.bavail * state.bsize;
  const runNeeds = datasetBytes + runPeakBytes(tier);
  if (stateFree < runNeeds) {
    const copy = datasetBytes > 0 ? `its dataset copy (${gib(datasetBytes)}) and ` : "";
    const what = `${copy}its run directory (the newest saved state and intermediate LoRA and the next ones while ` +
      "they are saved, and the final LoRA)";
    return {
      detail: `the worker's state dir has ${gib(stateFree)} free; this run needs ${gib(runNeeds)} for ${what}`,
      filesystem: "state_dir",
      free_bytes: stateFree,
      needed_bytes: runNeeds,
    };
  }
  const existing = nearestExisting(outputDir);
  const output = statfsSync(existing);
  const sameFs = statOrNull(existing)?.dev === statOrNull(stateDir)?.dev;
  const outputFree = output.bavail * output.bsize;
  const needed = loraBytes(tier) + (sameFs ? runNeeds : 0);
  if (outputFree >= needed) return null;
  const also = sameFs ? ", beside the run in the state dir on the same filesystem" : "";
  return {
    detail: `the filesystem of ${outputDir} has ${gib(outputFree)} free; this run needs ${gib(needed)} for its ` +
      `final LoRA${also}`,
    filesystem: "output_dir",
    output_dir: outputDir,
    free_bytes: outputFree,
    needed_bytes: needed,
  };
}

// The output dir is created at launch; until then its filesystem is its nearest existing ancestor's.
function nearestExisting(path: string): string {
  let at = path;
  while (!statOrNull(at)?.isDirectory() && dirname(at) !== at) at = dirname(at);
  return at;
}
