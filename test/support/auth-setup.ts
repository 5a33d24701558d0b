import { mkdirSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { setUpAuth, type AuthGate } from "../../src/auth/setup.ts";
import { ConfigSchema } from "../../src/config/schema.ts";
import { createGpuProbe } from "../../src/gpu/probe.ts";
import type { Logger } from "../../src/logger.ts";
import { FAKE_NVIDIA_SMI, type HostTree } from "./host-tree.ts";
import { TRAINERS, realModeConfig, silentLogger, supervisorFor } from "./real-mode.ts";

// Two tokens as `openssl rand -hex 16` would make them; B is the one rotated in.
export const TOKEN_A = "3f9c1e7a5b2d4c6e8f0a1b3c5d7e9f21";
export const TOKEN_B = "b7e2a9c4d1f6081e3a5c7e9b2d4f6a8c";

/** What `auth.mode = "none"` yields: every route open. */
export function openGate(): AuthGate {
  return { mode: "none", tokens: null, source: null, readTokens: null, readSource: null, metricsPublic: false };
}

export function writeTokens(dir: string, lines: string[], name = "token"): string {
  mkdirSync(dir, { recursive: true });
  const path = join(dir, name);
  writeFileSync(path, `${lines.join("\n")}\n`, { mode: 0o600 });
  return path;
}

export interface GateOptions {
  listen?: string;
  mode?: "token" | "none";
  tokenFile: string;
  readTokenFile?: string;
  credentialsDirectory?: string;
  metricsPublic?: boolean;
  log?: Logger;
}

// Without a read-token file of its own, one beside the token file that is not there: never the host's default.
export function gateFor(o: GateOptions) {
  const readTokenFile = o.readTokenFile ?? join(dirname(o.tokenFile), "no-read-token");
  const auth = {
    mode: o.mode ?? "token",
    token_file: o.tokenFile,
    read_token_file: readTokenFile,
    metrics_public: o.metricsPublic ?? false,
  };
  const config = ConfigSchema.parse({ listen: o.listen ?? "127.0.0.1:0", auth });
  return setUpAuth({ config, credentialsDirectory: o.credentialsDirectory, log: o.log ?? silentLogger });
}

export function mustGate(o: GateOptions): AuthGate {
  const setup = gateFor(o);
  if (!setup.ok) throw new Error(setup.error.join("\n"));
  return setup.value;
}

// The app in process over a real supervisor and store, behind the given gate.
export function appBehind(tree: HostTree, auth: AuthGate) {
  const trainer = join(TRAINERS, "exit-zero-without-file.sh");
  const config = realModeConfig(tree, trainer);
  const gpu = createGpuProbe({ nvidiaSmi: FAKE_NVIDIA_SMI, timeoutMs: 2000, ttlMs: 0 });
  return supervisorFor(tree, config, [trainer], { gpu, auth });
}
