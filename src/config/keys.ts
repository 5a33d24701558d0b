// The overridable leaf keys: one table drives environment overrides and "default in use" reporting.
export type KeyKind = "string" | "number" | "boolean" | "list" | "table";

export interface ConfigKey {
  key: string;
  env: string | null; // null: too structured for one environment variable
  kind: KeyKind;
}

const LEAVES: Array<[string, KeyKind]> = [
  ["listen", "string"],
  ["state_dir", "string"],
  ["handoff_root", "string"],
  ["model_roots", "list"],
  ["trainer.mode", "string"],
  ["trainer.backend", "string"],
  ["trainer.accelerate", "string"],
  ["trainer.sd_scripts_dir", "string"],
  ["trainer.cancel_grace_seconds", "number"],
  ["trainer.log_max_bytes", "number"],
  ["dataset.max_files", "number"],
  ["dataset.max_bytes", "number"],
  ["dataset.max_file_bytes", "number"],
  ["slurm.max_active_jobs", "number"],
  ["slurm.bin_dir", "string"],
  ["slurm.partition", "string"],
  ["slurm.account", "string"],
  ["slurm.poll_seconds", "number"],
  ["retention.keep_days", "number"],
  ["retention.keep_last", "number"],
  ["watchdog.stall_seconds", "number"],
  ["watchdog.nan_updates", "number"],
  ["watchdog.tier_timeout_seconds", "table"],
  ["auth.mode", "string"],
  ["auth.token_file", "string"],
  ["auth.metrics_public", "boolean"],
  ["simulate.seconds_per_step", "number"],
  ["simulate.fail", "string"],
  ["simulate.replay_log", "string"],
  ["simulate.replay_speed", "number"],
  ["gpu.nvidia_smi", "string"],
  ["gpu.probe_timeout_ms", "number"],
  ["gpu.cache_ttl_ms", "number"],
  ["gpu.admission", "string"],
  ["gpu.cotenant_patterns", "table"],
  ["gpu.vram_need_mib", "table"],
  ["devices", "table"],
];

export const ENV_PREFIX = "LORA_WORKER_";

export const CONFIG_KEYS: ConfigKey[] = LEAVES.map(([key, kind]) => ({
  key,
  kind,
  env: kind === "table" ? null : ENV_PREFIX + key.replaceAll(".", "_").toUpperCase(),
}));

export function getPath(obj: Record<string, unknown>, key: string): unknown {
  let cur: unknown = obj;
  for (const part of key.split(".")) {
    if (typeof cur !== "object" || cur === null || !Object.hasOwn(cur, part)) return undefined;
    cur = (cur as Record<string, unknown>)[part];
  }
  return cur;
}

export function setPath(obj: Record<string, unknown>, key: string, value: unknown): void {
  const parts = key.split(".");
  let cur = obj;
  for (const part of parts.slice(0, -1)) {
    const next = Object.hasOwn(cur, part) ? cur[part] : undefined;
    if (typeof next !== "object" || next === null) cur[part] = {};
    cur = cur[part] as Record<string, unknown>;
  }
  cur[parts.at(-1)!] = value;
}
