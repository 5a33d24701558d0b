import { z } from "zod";
import { AuthMode } from "../auth/setup.ts";
import { GpuAdmission, TrainerBackend, TrainerMode } from "../config/schema.ts";
import {
  ErrorCode, FILE_NOTES_LISTED, IdentityUnscored, JobStatus, LikenessVerdict, LONGEST_WINDOW, NotScoredReason,
  ONE_WINDOW, Phase, TOKEN_WINDOWS,
} from "../job.ts";
import { SAMPLE_TEMPLATES, sampleOf, samplePrompt } from "../recipe/samples.ts";
import { reasonsOf } from "../dispatch/refusal.ts";
import { DetailItem, JobRequest, MAX_SAMPLES } from "../request/schema.ts";
import { END_EVENT_ID } from "./events.ts";

// Response shapes, in zod so the OpenAPI document (openapi-document.ts and its parts), the client and the tests
// that check real answers share them.

/** A verified intermediate LoRA a run saved beside its state. */
export const CheckpointView = z.strictObject({
  step: z.int().min(1),
  sha256: z.string().regex(/^[0-9a-f]{64}$/),
  bytes: z.int().min(0),
  url: z.string().describe("serves the intermediate LoRA (behind the same token)"),
});

const ImageSizeView = z.strictObject({ image: z.string(), width: z.int().min(1), height: z.int().min(1) });
// A caption's count past the longest context: counting stops there (dataset/clip-tokens.ts).
const PAST = LONGEST_WINDOW + 1;
const SmallImageView = ImageSizeView.extend({ scale: z.number().gt(1).describe("how much sd-scripts scales it up") });

// Each note carries its sentence, as a refusal carries its detail: the status page and the CLI show `text`.
const text = z.string().describe("the note as a sentence, as the status page and `lora-worker status` show it");

const note = <T extends string, S extends z.ZodRawShape>(did: T, shape: S, description: string) =>
  z.strictObject({ file: z.string(), did: z.literal(did), ...shape, text }).describe(description);

/** What preparing did to one file of the job's copy. */
export const FileNoteView = z.discriminatedUnion("did", [
  note("trigger_added", { prefix: z.string() }, "a caption without the trigger: `prefix` was put in front"),
  note(
    "trigger_moved",
    { prefix: z.string() },
    `a caption whose trigger lay past the context (${LONGEST_WINDOW} tokens, the longest): \`prefix\` was put in front`,
  ),
  note("caption_kept", {}, "a caption that held the trigger within the context, left as it was"),
  note("no_caption", { trains_on: z.string() }, "an image without a caption: sd-scripts trains it on `trains_on`"),
  note(
    "turned_upright",
    { stored_as: z.string() },
    "an image stored turned or mirrored (EXIF orientation): re-encoded upright as PNG under `stored_as`",
  ),
  note("small", { scale: z.number().gt(1) }, "an image sd-scripts scales up by `scale` into its bucket"),
  note("duplicate", { same_as: z.string() }, "an image whose bytes are those of `same_as`"),
]);

const IdentityNoteView = z.discriminatedUnion("note", [
  z.strictObject({ file: z.string(), note: z.literal("no_face"), text }),
  z.strictObject({ file: z.string(), note: z.literal("several_faces"), faces: z.int().min(2), text }),
  z.strictObject({
    file: z.string(), note: z.literal("other_person"), distance: z.number(), threshold: z.number(), text,
  }).describe("a photo whose face lies farther than `threshold` from the mean face of the other photos"),
  z.strictObject({ file: z.string(), note: z.literal("unreadable"), error: z.string(), text }),
]);

const DatasetIdentityView = z.strictObject({
  scored: z.boolean(),
  reason: IdentityUnscored.nullable().describe("why not scored: `too_few_single_faces` (fewer than half the " +
    "photos show one face: a pet, a product, a style), `scorer_missing`, `scorer_failed`"),
  photos: z.strictObject({ one_face: z.int().min(0), no_face: z.int().min(0), several_faces: z.int().min(0) }),
  spread: z.number().nullable().describe("the mean distance of each one-face photo to the mean face of the others"),
  threshold: z.number().describe("dlib's 0.6: a face at most this far from another is the same person's"),
  notes: z.array(IdentityNoteView),
  text: z.string().describe("the identity in one line (the photos' faces, and the spread or why not scored), as " +
    "the status page and `lora-worker status` show it"),
}).describe("whose faces the photos show (docs/likeness.md); absent with `identity_check: \"off\"`");

/** What the worker did to the job's own copy of the dataset before the trainer read it, and what it found. */
export const DatasetReportView = z
  .strictObject({
    captions: z.strictObject({
      trigger_added: z
        .int()
        .min(0)
        .describe("caption files whose trained (first) line lacked the trigger as a whole word: it now starts " +
          "`<trigger> <subject_class>, `"),
      trigger_present: z.int().min(0).describe("caption files that held the trigger already, left as they were"),
      trigger_moved: z
        .int()
        .min(0)
        .optional()
        .describe("caption files whose trigger lay past the context (sd-scripts cuts it there): they now start " +
          "`<trigger> <subject_class>, ` too; absent from a job prepared by an older worker"),
      images_without_caption: z
        .int()
        .min(0)
        .describe("images with no caption file: sd-scripts trains them on `<trigger> <subject_class>`"),
      cut: z
        .array(z.strictObject({ caption: z.string(), tokens: z.int().min(1) }))
        .describe(`captions longer than the text encoders read (${LONGEST_WINDOW} tokens): the words past it are not ` +
          "trained on"),
      tokens_counted_by: z
        .enum(["clip tokenizer", "upper bound"])
        .describe("the CLIP tokenizer the trainer uses, or with none on disk a bound never below its count"),
    }),
    token_window: z
      .strictObject({
        tokens: z.literal(TOKEN_WINDOWS),
        longest: z
          .strictObject({
            caption: z.string(),
            tokens: z.int().min(0).max(PAST).describe(`${PAST}: more than ${LONGEST_WINDOW}`),
          })
          .nullable(),
      })
      .optional()
      .describe(`the caption context the run trains on (\`--max_token_length\`; ${ONE_WINDOW} passes no flag, ` +
        "sd-scripts' own), the smallest that holds `longest`, the longest caption as trained (null without " +
        `captions); absent from a job prepared by an older worker, which trained on ${LONGEST_WINDOW}`),
    turned_upright: z
      .array(z.string())
      .describe("images stored turned or mirrored with an EXIF orientation: trained upright (stored as PNG)"),
    small: z
      .array(z.union([SmallImageView, ImageSizeView]))
      .describe("images sd-scripts scales up into their aspect bucket, with the scale (an older worker named those " +
        "of fewer pixels than the tier's resolution squared, without it)"),
    large: z
      .array(ImageSizeView)
      .optional()
      .describe("images over Pillow's MAX_IMAGE_PIXELS (89,478,485) and within twice it: sd-scripts reads them, " +
        "and Pillow warns of a decompression bomb in the trainer's log (absent from records before it was kept)"),
    duplicates: z.array(z.array(z.string())).describe("sets of images whose bytes are identical"),
    files: z
      .array(FileNoteView)
      .max(FILE_NOTES_LISTED)
      .optional()
      .describe(`per file, what was done, in file order: the first ${FILE_NOTES_LISTED} notes`),
    files_not_listed: z.int().min(0).optional().describe("how many notes past those were left out of `files`"),
    warnings: z
      .array(z.string())
      .optional()
      .describe("what the request overrode: a kohya folder name naming another trigger or class"),
    identity: DatasetIdentityView.optional(),
  })
  .describe("images and captions are named as they lie in the request's dataset_dir");

/** A preview PNG the run drew at one of its preview steps; `url` serves it (behind the same token). */
export const SampleView = z.strictObject({
  step: z.int().min(1).describe("the step it was drawn at"),
  index: z
    .int()
    .min(0)
    .max(2 * MAX_SAMPLES - 1)
    .describe("its entry in the prompts file: per template of the request's samples, the trigger's then the class's"),
  template: z.enum(SAMPLE_TEMPLATES.map((t) => t.name)).nullable().describe("the prompt template it was drawn from"),
  subject: z
    .enum(["trigger", "class"])
    .nullable()
    .describe("whom it shows: `<trigger> <subject_class>`, or the class alone (to see class bleed), same seed"),
  prompt: z.string().nullable().describe("the prompt it was drawn from: the template with the trigger and class, " +
    "or the class alone"),
  name: z.string().describe("the file's name in the job's run directory (sample/)"),
  bytes: z.int().min(0),
  url: z.string().describe("GET /train/{id}/samples/{name}, relative to the worker"),
});

const LikenessSeriesView = z.strictObject({
  distance: z.number().min(0).nullable().describe("the mean over its images with a face of each image's face " +
    "closest to the dataset's identity (128-D Euclidean); null: no face in any of them"),
  faces: z.int().min(0).describe("faces found in its images"),
  files: z.array(z.string()).describe("the samples scored, by name"),
});

/** The likeness report (SPEC §8): the preview points scored against the dataset's identity, and the verdict. */
export const LikenessView = z.strictObject({
  threshold: z.number().positive().describe("at or under it a face is the person's (dlib's 0.6)"),
  points: z.array(z.strictObject({
    step: z.int().min(1),
    trigger: LikenessSeriesView.describe("the previews of `<trigger> <subject_class>`: the likeness"),
    class: LikenessSeriesView.describe("the previews of the class alone: a match is class bleed"),
  })).describe("in step order, each as it was scored"),
  verdict: LikenessVerdict.nullable().describe("null while the run goes on; never changes the job's status"),
  reason: NotScoredReason.nullable().describe("why a `not_scored` verdict"),
  best_step: z.int().min(1).nullable()
    .describe("the point with the closest trigger likeness whose class previews do not match"),
  best_sha256: z.string().regex(/^[0-9a-f]{64}$/).nullable().describe("the LoRA kept at best_step"),
  best_url: z.string().nullable().describe("GET /train/{id}/checkpoints/{best_step}, relative to the worker"),
  next_step: z.string().nullable().describe("docs/troubleshooting.md's \"what to do\" for the verdict, word for word"),
});

export const JobView = z.strictObject({
  worker_job_id: z.uuid(),
  status: JobStatus,
  phase: Phase,
  step: z.int().min(0),
  total_steps: z.int().min(0).nullable(),
  loss: z.number().nullable(),
  eta_s: z.number().nullable(),
  lora_path: z.string().optional(),
  lora_sha256: z.string().regex(/^[0-9a-f]{64}$/).optional(),
  lora_bytes: z.int().optional(),
  error: z.string().optional(),
  error_code: ErrorCode.optional(),
  next_step: z
    .strictObject({
      text: z.string().describe("docs/troubleshooting.md's \"what to do\" for the error_code, word for word"),
      steps: z
        .array(z.string())
        .min(1)
        .describe("the same, a sentence each, in the order to try them (text is them joined by a space)"),
      retry_elsewhere: z
        .boolean()
        .describe("true where sending the request again on another card or a lighter tier is the better first move " +
          "than a resume (`cuda_oom`)"),
    })
    .optional()
    .describe("with `error_code`, until a resume takes the job: what to do about it"),
  created_at: z.iso.datetime(),
  started_at: z.iso.datetime().optional(),
  ended_at: z.iso.datetime().optional(),
  simulated: z.boolean(),
  exit_code: z.int().optional(),
  signal: z.string().optional(),
  admission_warning: z.string().optional(),
  queue_reason: z
    .string()
    .optional()
    .describe("Slurm backend: why Slurm holds the run pending (Resources, Priority, …), while its phase is queued"),
  slurm_job_id: z
    .string()
    .regex(/^\d+$/)
    .optional()
    .describe("Slurm backend: the run's batch job, once submitted; a run Slurm holds keeps it after a switch to local"),
  /** The private copy of the dataset the trainer read: two runs with the same sha256 trained on the same files. */
  dataset: z
    .strictObject({
      files: z.int().min(1),
      bytes: z.int().min(0),
      sha256: z
        .string()
        .regex(/^[0-9a-f]{64}$/)
        .describe("of the files as arbo sent them, before the copy was prepared"),
      prepared: DatasetReportView.optional(),
    })
    .optional(),
  resume_step: z
    .int()
    .min(0)
    .nullable()
    .describe("the step of the newest complete saved state, where a resume would start; null before the first"),
  resumable: z
    .boolean()
    .describe("failed or cancelled, with a saved state, and not resumed yet: POST /train/{id}/resume starts from it"),
  checkpoints: z.array(CheckpointView).describe("the verified intermediate LoRAs still on disk"),
  paused: z
    .boolean()
    .describe("cancelled by a pause, stopped right after its newest saved state, and not resumed yet (once resumed, " +
      "`resumed_by` names the job that went on and this is false)"),
  pause_requested_at: z.iso.datetime().optional(),
  pause_step: z
    .int()
    .min(1)
    .optional()
    .describe("while a pause is asked of a running job: the step of the saved state it will stop at (absent when " +
      "the run reaches its end first)"),
  resumed_from: z.uuid().optional().describe("the job this one continues"),
  resumed_from_step: z.int().min(0).optional().describe("the step of the state this job started from"),
  resumed_by: z.uuid().optional().describe("the job that continues this one: this one is resumed, no longer paused"),
  resume_gone: z.string().optional().describe("why a saved state of this job is gone"),
  samples: z
    .array(SampleView)
    .describe("the preview images drawn so far, by step then index; a resumed job's start with its predecessor's"),
  likeness: LikenessView.optional().describe("whether the LoRA shows the person (absent before it was kept)"),
  forced_kill: z.boolean(),
  recorded: z
    .literal(false)
    .optional()
    .describe("the outcome is known but the state dir has not taken the record yet (it is full, say)"),
  // As dispatched; tier "smoke" marks the worker's own smoke run (POST /smoke).
  request: JobRequest,
});

export const Dispatched = z.strictObject({ worker_job_id: z.uuid(), status: JobStatus });

/** POST /dataset/check's answer. */
export const DatasetCheck = z.strictObject({ prepared: DatasetReportView });
export const Resumed = z.strictObject({
  worker_job_id: z.uuid(),
  status: JobStatus,
  resumed_from: z.uuid(),
  resume_step: z.int().min(0),
});
export const JobList = z.strictObject({ jobs: z.array(JobView), next_cursor: z.string().nullable() });
export const LossCurve = z.strictObject({
  worker_job_id: z.uuid(),
  points: z.array(z.tuple([z.int(), z.number()])),
  total_points: z.int(),
  nan_points: z.int(),
});

export { DetailItem };
export const ValidationError = z.strictObject({ detail: z.array(DetailItem) });
const Cotenant = z.strictObject({
  device_index: z.int(),
  pid: z.int(),
  name: z.string(),
  used_mib: z.int().nullable(),
});
export const Conflict = z.strictObject({
  detail: z.string(),
  reason: z.enum(reasonsOf(409)),
  active_job_id: z.uuid().optional().describe("busy, output_in_use: the job in the way"),
  device_index: z.int().optional().describe("insufficient_vram, cotenant_active: the device asked for"),
  free_mib: z.int().optional(),
  needed_mib: z.int().optional(),
  cotenants: z.array(Cotenant).optional().describe("insufficient_vram, cotenant_active: who holds the device's VRAM"),
  output_dir: z.string().optional(),
  filesystem: z.enum(["output_dir", "state_dir"]).optional(),
  field: z.string().optional().describe("base_model_changed: the request field whose file changed"),
  free_bytes: z.int().optional(),
  needed_bytes: z.int().optional(),
});
export const Unavailable = z.strictObject({
  detail: z.string(),
  reason: z.enum(reasonsOf(503)),
});
export const Problem = z.strictObject({ detail: z.string() });

/** GET /train/{id}/log: where the next read goes on from (`?after=`); absent when the log cannot be followed. */
export const LOG_CURSOR_HEADER = "x-log-cursor";
/** GET /train/{id}/log?after=: present ("true") when the log was cut since that cursor was handed out. */
export const LOG_CUT_HEADER = "x-log-cut";

const GpuProcess = z.strictObject({
  pid: z.int(),
  name: z.string(),
  used_mib: z.int().nullable(),
  role: z.enum(["training", "cotenant", "other"]),
});
export const HostGpuStatus = z.strictObject({
  devices: z.array(
    z.strictObject({
      index: z.int(),
      name: z.string(),
      uuid: z.string(),
      memory_total_mib: z.int().nullable(),
      memory_used_mib: z.int().nullable(),
      memory_free_mib: z.int().nullable(),
      utilization_pct: z.number().nullable(),
      processes: z.array(GpuProcess),
    }),
  ),
  cotenants: z.array(Cotenant),
  tts_on_3090: z.boolean(),
});
export const ClusterGpuStatus = z.strictObject({
  backend: z.literal("slurm"),
  nodes: z.array(
    z.strictObject({
      name: z.string(),
      state: z.string().describe("Slurm's State: IDLE, MIXED, ALLOCATED, DOWN+DRAIN, …"),
      gpus: z.array(
        z.strictObject({
          type: z.string().nullable().describe("the gres type, null for an untyped gpu gres"),
          total: z.int().min(0),
          allocated: z.int().min(0),
        }),
      ),
      gres: z.string().describe("Slurm's own words: Gres as scontrol prints it"),
      gres_used: z.string().describe("GresUsed as scontrol prints it"),
    }),
  ),
});
export const GpuStatus = z
  .xor([HostGpuStatus, ClusterGpuStatus])
  .describe("this host's devices as nvidia-smi sees them (local backend), or the cluster's nodes (Slurm backend)");

// What the last nvidia-smi run said, however old: /healthz never waits for a probe.
const probedAt = z.iso.datetime();
const GpuProbeFact = z.xor([
  z.strictObject({ probed: z.literal(false) }),
  z.strictObject({ probed: z.literal(true), ok: z.literal(true), devices: z.int().min(0), probed_at: probedAt }),
  z.strictObject({ probed: z.literal(true), ok: z.literal(false), detail: z.string(), probed_at: probedAt }),
]);
// A state dir that cannot take writes degrades the worker: runs go on from memory, new trains are refused.
const StateDirFact = z.xor([
  z.strictObject({ path: z.string(), writable: z.literal(true) }),
  z.strictObject({ path: z.string(), writable: z.literal(false), error: z.string(), since: z.iso.datetime() }),
]);

export const Health = z.strictObject({
  status: z.literal("ok"),
  version: z.string(),
  active_job_id: z.uuid().nullable().describe("the first active job, kept for arbo's client"),
  active_job_ids: z.array(z.uuid()).describe("every active job: more than one only on the Slurm backend"),
  unrecorded_job_ids: z
    .array(z.uuid())
    .describe("jobs whose outcome is known but waits for the state dir to take its record (answered, marked)"),
  backend: TrainerBackend,
  max_active_jobs: z.int().min(1).optional().describe("Slurm backend: slurm.max_active_jobs"),
  trainer_mode: TrainerMode,
  simulated: z.boolean(),
  auth_mode: AuthMode,
  gpu: GpuProbeFact,
  state_dir: StateDirFact,
  // Whether trainer.tokenizer_dir holds the two CLIP tokenizers a real run loads offline.
  tokenizers: z.strictObject({
    dir: z.string(),
    ready: z.boolean(),
    problems: z.array(z.string()),
    required: z
      .literal(false)
      .optional()
      .describe("in simulate mode only: the simulated trainer loads no tokenizer, so none is needed (ready: true)"),
  }),
  gpu_admission: GpuAdmission,
  listen: z.string().describe("as configured"),
  config_file: z.string().nullable().describe("the config file read; null when none was found"),
  config_defaults_in_use: z.array(z.string()).describe("the config keys left at their defaults"),
  uptime_s: z.int().min(0),
});

/** One event of GET /train/{id}/events, its `data:` line parsed as JSON. */
export const JobEvent = z.xor([
  z.strictObject({
    event: z.literal("job"),
    id: z.string().regex(/^[1-9]\d*$/).describe("counts up, on from the Last-Event-ID a stream resumed with"),
    data: JobView,
  }),
  z.strictObject({ event: z.literal("end"), id: z.literal(END_EVENT_ID), data: JobView }),
]);

export const TRAIN_REQUEST_EXAMPLE = {
  dataset_dir: "/worktank/arbo/train/t-123/dataset",
  base_model_path: "/worktank/models/sdxl-base-1.0.safetensors",
  output_dir: "/worktank/arbo/train/t-123/out",
  output_name: "ohwx_person",
  trigger: "ohwx",
  subject_class: "person",
  repeats: 10,
  tier: "balanced",
  device_index: 1,
  seed: 1234,
};

const EXAMPLE_JOB_ID = "3f1c2a4e-5b6d-4e7f-8a9b-0c1d2e3f4a5b";

function exampleSample(index: number, bytes: number) {
  const name = `ohwx_person_000375_0${index}_20261130102712_${1234 + Math.floor(index / 2)}.png`;
  const url = `/train/${EXAMPLE_JOB_ID}/samples/${name}`;
  const prompt = samplePrompt(TRAIN_REQUEST_EXAMPLE, index);
  const { template, subject } = sampleOf(index)!;
  return { step: 375, index, template: template.name, subject, prompt, name, bytes, url };
}

export const JOB_VIEW_EXAMPLE = {
  worker_job_id: EXAMPLE_JOB_ID,
  status: "training",
  phase: "training",
  step: 640,
  total_steps: 1500,
  loss: 0.0871,
  eta_s: 1290,
  created_at: "2026-11-30T10:00:00.000Z",
  started_at: "2026-11-30T10:00:00.120Z",
  simulated: false,
  resume_step: 600,
  resumable: false,
  checkpoints: [
    {
      step: 600,
      sha256: "9b2f0d6c4e1a8b7c3d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4",
      bytes: 170_241_424,
      url: `/train/${EXAMPLE_JOB_ID}/checkpoints/600`,
    },
  ],
  paused: false,
  samples: [exampleSample(0, 1_184_213), exampleSample(1, 1_204_693)],
  forced_kill: false,
  request: { ...TRAIN_REQUEST_EXAMPLE, samples: 2 },
};
