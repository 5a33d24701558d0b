import { isIP } from "node:net";
import { z } from "zod";
import { parseFailurePlan, replayClash } from "../simulator/knobs.ts";
import { DeviceClass } from "../tiers.ts";

// Defaults are the reference host of SPEC §1; every one is reported when in use.
export const DEFAULTS = {
  listen: "0.0.0.0:8203",
  state_dir: "/var/lib/lora-worker",
  handoff_root: "/worktank/arbo/train",
  model_roots: ["/worktank/models"],
  accelerate: "/opt/fluxgym/.venv/bin/accelerate",
  sd_scripts_dir: "/opt/fluxgym/sd-scripts",
  nvidia_smi: "nvidia-smi",
  token_file: "/etc/lora-worker/token",
} as const;

const absolutePath = z
  .string()
  .min(1)
  .refine((p) => p.startsWith("/"), { message: "must be an absolute path" });

const Device = z.strictObject({
  index: z.int().min(0).max(63),
  name: z.string().min(1).max(64),
  class: DeviceClass,
  // On the Slurm backend the GPU a run asks Slurm for (sbatch --gres), e.g. "gpu:a6000:1": the device is then a
  // GPU type anywhere in the cluster, and `index` only names it in requests.
  gres: z.string().regex(/^[A-Za-z0-9_]+(:[A-Za-z0-9_.-]+)*$/, "must be a Slurm gres like gpu:a6000:1").optional(),
});
export type Device = z.infer<typeof Device>;

// MiB a tier needs free on a device of each class before it may start there.
const VramNeed = z.strictObject({ "24gb": z.int().positive().optional(), "48gb": z.int().positive().optional() });

function isRegExp(source: string): boolean {
  try {
    new RegExp(source, "i");
    return true;
  } catch {
    return false;
  }
}

// Named for /healthz, which reports them as configured.
export const TrainerMode = z.enum(["real", "simulate"]);
export const TrainerBackend = z.enum(["local", "slurm"]);
export const GpuAdmission = z.enum(["enforce", "warn", "off"]);

const DEFAULT_DEVICES: Device[] = [
  { index: 0, name: "RTX 3090", class: "24gb" },
  { index: 1, name: "RTX A6000", class: "48gb" },
];

export const ConfigSchema = z.strictObject({
  listen: z.string().regex(/^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+):\d{1,5}$/, {
    message: 'must be "host:port" (IPv6 as "[::1]:8203")',
  }).transform(parseListen).prefault(DEFAULTS.listen),
  state_dir: absolutePath.default(DEFAULTS.state_dir),
  handoff_root: absolutePath.default(DEFAULTS.handoff_root),
  model_roots: z.array(absolutePath).min(1).default([...DEFAULTS.model_roots]),
  trainer: z
    .strictObject({
      mode: TrainerMode.default("real"),
      // local: runs on this host, one at a time; slurm: each run is a batch job on a Slurm cluster (see [slurm]).
      backend: TrainerBackend.default("local"),
      accelerate: absolutePath.default(DEFAULTS.accelerate),
      sd_scripts_dir: absolutePath.default(DEFAULTS.sd_scripts_dir),
      // The CLIP tokenizers, passed as --tokenizer_cache_dir (tokenizers/layout.ts); default <state_dir>/tokenizers.
      tokenizer_dir: absolutePath.optional(),
      cancel_grace_seconds: z.number().positive().max(600).default(10),
      log_max_bytes: z.int().min(1024 * 1024).max(2 ** 40).default(256 * 1024 * 1024),
    })
    .prefault({}),
  // What a dataset may hold before it is copied into the job directory: tens to hundreds of images, a few MB each.
  dataset: z
    .strictObject({
      max_files: z.int().min(1).max(1_000_000).default(2000),
      max_bytes: z.int().min(1024 * 1024).max(2 ** 40).default(4 * 1024 ** 3),
      max_file_bytes: z.int().min(1024).max(2 ** 40).default(100 * 1024 * 1024),
    })
    .prefault({}),
  // The Slurm backend: how many runs the worker admits at once (each a batch job that waits in Slurm's queue for its
  // GPU), where the commands are, and where jobs go (partition and account as the cluster's policy requires).
  slurm: z
    .strictObject({
      max_active_jobs: z.int().min(1).max(1000).default(1),
      bin_dir: absolutePath.default("/usr/bin"),
      partition: z.string().regex(/^[A-Za-z0-9_.-]*$/).default(""),
      account: z.string().regex(/^[A-Za-z0-9_.-]*$/).default(""),
      // sbatch --mem: the host memory a run may use on its node. Where memory is a consumable resource, a job
      // without it gets the partition's default, often far below SDXL training's (or the whole node).
      mem: z.string().regex(/^(?:[1-9]\d*[KMGT]?)?$/, "must be a Slurm memory size like 48G, or empty").default(""),
      // How often a run's state is asked of Slurm (scontrol): the delay before a start, an end or a queue reason shows.
      poll_seconds: z.number().min(0.1).max(60).default(1),
    })
    .prefault({}),
  // `lora-worker smoke`: the base model its short run trains on (a .safetensors inside a model root, checked as a
  // request's base_model_path is). Unset, the smoke route refuses and says to set it.
  smoke: z.strictObject({ base_model: absolutePath.optional() }).prefault({}),
  // Job directories (logs, dataset copies) of ended jobs older than this are removed; the records stay.
  retention: z
    .strictObject({
      keep_days: z.number().positive().max(36_500).default(30),
      keep_last: z.int().min(0).max(1_000_000).default(20),
    })
    .prefault({}),
  watchdog: z
    .strictObject({
      stall_seconds: z.number().positive().max(86_400).default(900),
      nan_updates: z.int().min(1).max(100_000).default(20),
      tier_timeout_seconds: z
        .strictObject({
          fast: z.number().positive().default(2 * 3600),
          balanced: z.number().positive().default(6 * 3600),
          quality: z.number().positive().default(12 * 3600),
        })
        .prefault({}),
    })
    .prefault({}),
  auth: z
    .strictObject({
      mode: z.enum(["token", "none"]).default("token"),
      token_file: absolutePath.default(DEFAULTS.token_file),
      metrics_public: z.boolean().default(false),
    })
    .prefault({}),
  simulate: z
    .strictObject({
      seconds_per_step: z.number().min(0).max(60).default(0.5),
      // The simulator's own parser: the config refuses exactly what the simulated trainer would.
      fail: z
        .string()
        .superRefine((fail, ctx) => {
          const plan = parseFailurePlan(fail);
          if (plan.ok) return;
          ctx.addIssue({ code: "custom", message: `must be "" or a comma-separated list of failures: ${plan.error}` });
        })
        .default(""),
      replay_log: z
        .string()
        .refine((p) => p === "" || p.startsWith("/"), "must be empty or an absolute path")
        .default(""),
      replay_speed: z.number().positive().max(1e6).default(1),
    })
    .superRefine((sim, ctx) => {
      const plan = parseFailurePlan(sim.fail);
      const clash = sim.replay_log === "" || !plan.ok ? null : replayClash(plan.value);
      if (clash === null) return;
      const only = "ignore-sigterm, orphan@N and setsid-orphan@N, as the recorded log decides how the run ends";
      const message = `${clash} cannot join replay_log: with replay_log, fail may hold only ${only}`;
      ctx.addIssue({ code: "custom", path: ["fail"], message });
    })
    .prefault({}),
  gpu: z
    .strictObject({
      nvidia_smi: z.string().min(1).default(DEFAULTS.nvidia_smi),
      probe_timeout_ms: z.int().min(100).max(60_000).default(5000),
      cache_ttl_ms: z.int().min(0).max(60_000).default(2000),
      admission: GpuAdmission.default("enforce"),
      cotenant_patterns: z
        .array(z.string().min(1).refine(isRegExp, "must be a valid regular expression"))
        .default(["tts"]),
      vram_need_mib: z
        .strictObject({
          fast: VramNeed.prefault({ "24gb": 14_000, "48gb": 16_000 }),
          balanced: VramNeed.prefault({ "24gb": 18_000, "48gb": 22_000 }),
          quality: VramNeed.prefault({ "48gb": 36_000 }),
        })
        .prefault({}),
    })
    .prefault({}),
  devices: z
    .array(Device)
    .min(1)
    .refine((ds) => new Set(ds.map((d) => d.index)).size === ds.length, {
      message: "device indexes must be unique",
    })
    .default(DEFAULT_DEVICES),
}).superRefine((config, ctx) => {
  if (config.trainer.backend !== "slurm") return;
  for (const [i, device] of config.devices.entries()) {
    if (device.gres !== undefined) continue;
    const message = 'is required with trainer.backend = "slurm"';
    ctx.addIssue({ code: "custom", path: ["devices", i, "gres"], message });
  }
});

export type Config = z.infer<typeof ConfigSchema>;

// `listen` parsed once: serve binds host:port, doctor probes it, auth asks whether it is loopback, a client dials url.
export interface Listen {
  // As written in the config: what messages and /healthz quote.
  text: string;
  // Without IPv6 brackets: "::1", "0.0.0.0", "localhost".
  host: string;
  port: number;
  // As a client dials it (a wildcard bind is reached on loopback); null on port 0, which only the running worker knows.
  url: string | null;
  loopback: boolean;
}

// `text` has passed the schema's "host:port" pattern ("127.0.0.1:8203", "[::1]:8203", "localhost:8203").
export function parseListen(text: string): Listen {
  const at = text.lastIndexOf(":");
  const host = text.slice(0, at).replace(/^\[(.*)\]$/, "$1");
  const port = Number(text.slice(at + 1));
  return { text, host, port, url: port === 0 ? null : dialedUrl(host, port), loopback: isLoopback(host) };
}

function dialedUrl(host: string, port: number): string {
  const dialed = host === "0.0.0.0" ? "127.0.0.1" : host === "::" ? "::1" : host;
  return `http://${dialed.includes(":") ? `[${dialed}]` : dialed}:${port}`;
}

function isLoopback(hostname: string): boolean {
  const host = hostname.toLowerCase();
  if (host === "localhost") return true;
  if (isIP(host) === 4) return host.startsWith("127.");
  if (isIP(host) === 6) return host === "::1" || /^::ffff:127\./.test(host);
  return false;
}
