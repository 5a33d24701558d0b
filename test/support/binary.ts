import { readdirSync, statSync } from "node:fs";
import { join } from "node:path";
import { REPO } from "./host-tree.ts";

export const BINARY = join(REPO, "dist/lora-worker");

function newestSource(dir: string): number {
  return readdirSync(dir, { withFileTypes: true }).reduce((newest, entry) => {
    const path = join(dir, entry.name);
    return Math.max(newest, entry.isDirectory() ? newestSource(path) : statSync(path).mtimeMs);
  }, 0);
}

function builtAt(): number {
  try {
    return statSync(BINARY).mtimeMs;
  } catch {
    return 0;
  }
}

// Tests of the compiled binary must test this tree's code: build when the binary is missing or older
// than any source (the README's test command runs on a fresh clone; CI builds first).
export function ensureBinary(): string {
  const sources = Math.max(newestSource(join(REPO, "src")), statSync(join(REPO, "build.ts")).mtimeMs, statSync(join(REPO, "package.json")).mtimeMs);
  if (builtAt() >= sources) return BINARY;
  const res = Bun.spawnSync([process.execPath, "run", "build.ts"], { cwd: REPO, stdout: "inherit", stderr: "inherit" });
  if (res.exitCode !== 0) throw new Error(`bun run build.ts exited ${res.exitCode}`);
  return BINARY;
}
