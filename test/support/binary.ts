import { existsSync } from "node:fs";
import { join } from "node:path";
import { REPO } from "./host-tree.ts";

export const BINARY = join(REPO, "dist/lora-worker");

// The README's test command runs on a fresh clone: build the binary if CI's build step has not.
export function ensureBinary(): string {
  if (existsSync(BINARY)) return BINARY;
  const res = Bun.spawnSync([process.execPath, "run", "build.ts"], { cwd: REPO, stdout: "inherit", stderr: "inherit" });
  if (res.exitCode !== 0) throw new Error(`bun run build.ts exited ${res.exitCode}`);
  return BINARY;
}
