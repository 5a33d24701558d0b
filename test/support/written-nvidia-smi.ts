import { chmodSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { FAKE_NVIDIA_SMI } from "./host-tree.ts";

export const RTX_3090_ROW = "0, 00000000:01:00.0, GPU-5e1c0a3b-7d24-4f89-b6a1-3c9e2f0d8b71, NVIDIA GeForce RTX 3090, 24576, 3012, 21232, 7";
export const RTX_3090_UUID = "GPU-5e1c0a3b-7d24-4f89-b6a1-3c9e2f0d8b71";

/** The fake nvidia-smi answering from scenario files written here (bytes a fixture file on disk would hide). */
export function writtenNvidiaSmi(dir: string, files: Record<string, string>): string {
  const scenario = join(dir, "nvidia-smi-scenario");
  mkdirSync(scenario, { recursive: true });
  for (const [name, text] of Object.entries(files)) writeFileSync(join(scenario, name), text);
  return executable(join(dir, "nvidia-smi"), `export FAKE_NVIDIA_SMI_SCENARIO='${scenario}'\nexec '${FAKE_NVIDIA_SMI}' "$@"`);
}

/**
 * An nvidia-smi that never stops printing rows. The shell leads the group; `yes | cat` print, and a `sleep` holds no
 * pipe, so closing the pipes or killing the shell leaves it running: only a kill of the whole group ends it. Each
 * run appends its pid (its group's id) to `pidFile`.
 */
export function endlessNvidiaSmi(dir: string, pidFile: string): string {
  const row = `${RTX_3090_UUID}, 48213, python3 /opt/tts/server.py, 3000`;
  return executable(join(dir, "endless-nvidia-smi"), `echo $$ >>'${pidFile}'\nsleep 300 </dev/null >/dev/null 2>&1 &\nyes '${row}' | cat`);
}

function executable(path: string, body: string): string {
  writeFileSync(path, `#!/bin/sh\n${body}\n`);
  chmodSync(path, 0o755);
  return path;
}
