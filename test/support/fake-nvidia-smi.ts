import { chmodSync, existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { FAKE_NVIDIA_SMI } from "./host-tree.ts";

export const GPU_SCENARIOS = join(import.meta.dir, "../fixtures/gpu");

export interface FakeNvidiaSmi {
  path: string;
  /** "<pid> <first argument>" per nvidia-smi started, as the fake itself recorded it. */
  invocations(): string[];
}

/** A wrapper in `dir` that runs the fake with its environment baked in, so tests never touch this process's env. */
export function fakeNvidiaSmi(dir: string, scenario?: string): FakeNvidiaSmi {
  const countFile = join(dir, "nvidia-smi-invocations");
  const scenarioLine = scenario ? `export FAKE_NVIDIA_SMI_SCENARIO='${join(GPU_SCENARIOS, scenario)}'` : "unset FAKE_NVIDIA_SMI_SCENARIO";
  const path = join(dir, "nvidia-smi");
  writeFileSync(path, `#!/bin/sh\n${scenarioLine}\nexport FAKE_NVIDIA_SMI_COUNT_FILE='${countFile}'\nexec '${FAKE_NVIDIA_SMI}' "$@"\n`);
  chmodSync(path, 0o755);
  const invocations = () => (existsSync(countFile) ? readFileSync(countFile, "utf8").split("\n").filter(Boolean) : []);
  return { path, invocations };
}
