import { mkdirSync, readdirSync, statSync } from "node:fs";
import { dirname, join } from "node:path";
import { REPO } from "./host-tree.ts";

export const BINARY = join(REPO, "dist/lora-worker");
const BUILD_LOCK = join(REPO, "dist/.build.lock");

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

function newestInput(): number {
  return Math.max(newestSource(join(REPO, "src")), statSync(join(REPO, "build.ts")).mtimeMs, statSync(join(REPO, "package.json")).mtimeMs);
}

// Tests of the compiled binary must test this tree's code: build when the binary is missing or older
// than any source (the README's test command runs on a fresh clone; CI builds first).
// Under `bun test --parallel` several files may find it stale at once: the build runs under flock(1) on one lock
// file and whoever gets the lock looks again, so one file compiles and the others wait and find it fresh. (Bun
// writes the binary under a temporary name and renames it, so a file that looks meanwhile never runs half of one.)
export function ensureBinary(): string {
  if (builtAt() >= newestInput()) return BINARY;
  mkdirSync(dirname(BINARY), { recursive: true });
  const res = Bun.spawnSync(["flock", BUILD_LOCK, process.execPath, import.meta.path], { cwd: REPO, stdout: "inherit", stderr: "inherit" });
  if (res.exitCode !== 0) throw new Error(`building ${BINARY} under flock ${BUILD_LOCK} exited ${res.exitCode}`);
  return BINARY;
}

// Run as a script (by ensureBinary, holding the lock): builds unless another file built it while this one waited.
if (import.meta.main && builtAt() < newestInput()) {
  const res = Bun.spawnSync([process.execPath, "run", "build.ts"], { cwd: REPO, stdout: "inherit", stderr: "inherit" });
  if (res.exitCode !== 0) throw new Error(`bun run build.ts exited ${res.exitCode}`);
}
