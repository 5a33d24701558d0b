import type { Config } from "../../src/config/schema.ts";
import { createGpuProbe } from "../../src/gpu/probe.ts";
import type { LikenessScoring } from "../../src/supervisor/index.ts";
import type { HostTree } from "./host-tree.ts";
import { supervisorFor } from "./real-mode.ts";

// The app in process, over a real supervisor, store, probe and trainer; requests go through app.request.
export function inProcessApp(tree: HostTree, config: Config, trainerCommand: string[], opts: { nvidiaSmi?: string; bodyDeadlineMs?: number; likeness?: LikenessScoring } = {}) {
  const gpu = createGpuProbe({ nvidiaSmi: opts.nvidiaSmi ?? config.gpu.nvidia_smi, timeoutMs: 2000, ttlMs: 0 });
  const s = supervisorFor(tree, config, trainerCommand, { gpu, bodyDeadlineMs: opts.bodyDeadlineMs, likeness: opts.likeness });
  const { app } = s;
  const post = (body: string, type = "application/json") => app.request("/train", { method: "POST", headers: { "content-type": type }, body });
  const json = async (path: string, init?: RequestInit) => {
    const res = await app.request(path, init);
    return { status: res.status, body: (await res.json()) as any };
  };
  return { ...s, post, json };
}
