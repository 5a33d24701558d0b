import { z } from "zod";

// The job's own vocabulary, in one place: the SQL CHECK, the OpenAPI document, the CLI and the metrics derive
// from these. Lifecycle state (status, phase) is kept apart from outcome (error code, stop reason), as Nomad does.
export const JobStatus = z.enum(["starting", "training", "succeeded", "failed", "cancelled"]);
export type JobStatus = z.infer<typeof JobStatus>;

// What the job list may be filtered by: a status, or what a person looks for among the ended jobs: the paused ones
// (cancelled right after a saved state, not resumed yet) and the resumable ones (failed or cancelled, with a state,
// not resumed yet). isPaused and isResumable below say the same; store/job-row.ts FILTER_SQL and the partial indexes
// of store/schema.sql.ts are held to them by test/unit/job-words.test.ts.
export const JobFilter = z.enum([...JobStatus.options, "paused", "resumable"]);
export type JobFilter = z.infer<typeof JobFilter>;

export const ACTIVE_STATUSES = ["starting", "training"] as const satisfies readonly JobStatus[];
type TerminalStatus = Exclude<JobStatus, (typeof ACTIVE_STATUSES)[number]>;

/** A stop asked for by a person, not decided by a watchdog: the run ends `cancelled`. */
export function isCancel(reason: StopReason | null): boolean {
  return reason === "cancel" || reason === "pause";
}

export function isActive(status: JobStatus): boolean {
  return (ACTIVE_STATUSES as readonly JobStatus[]).includes(status);
}

/** What the words for an ended job (paused, resumable, resumed) are read from, as the record holds it. */
export interface SavedFacts {
  status: JobStatus;
  stop_reason: StopReason | null;
  /** The newest complete saved state a resume would start from, or null. */
  resume_state: string | null;
  /** The job that continues this one, or null. */
  resumed_by: string | null;
}

/** Stopped by a pause right after a saved state, and not continued yet: once resumed, the chain went on. */
export function isPaused(job: SavedFacts): boolean {
  return job.status === "cancelled" && job.stop_reason === "pause" && job.resumed_by === null;
}

/** Ended without its LoRA, with a saved state that no resume has taken yet (a paused job included). */
export function isResumable(job: SavedFacts): boolean {
  return (job.status === "failed" || job.status === "cancelled") && job.resume_state !== null &&
    job.resumed_by === null;
}

// In the order a run goes through them; a phase never moves backwards, but for `sampling`, a pause of
// `training` at a preview step while preview images are generated.
// `preparing` while the worker copies the dataset into the job directory, before any trainer exists;
// `queued` only on the Slurm backend, while Slurm holds the run pending.
export const Phase = z.enum(["preparing", "queued", "loading", "caching", "training", "sampling", "saving", "done"]);
export type Phase = z.infer<typeof Phase>;

/** Where a run stands, as the tracker folds it, the record keeps it and the API answers it. */
export interface ProgressFields {
  phase: Phase;
  step: number;
  total_steps: number | null;
  loss: number | null;
  eta_s: number | null;
}

export const ErrorCode = z.enum([
  "cuda_oom", "host_oom_killed", "nan_loss", "dataset_empty", "base_model_invalid", "stalled", "timeout",
  "output_missing", "output_invalid", "disk_full", "worker_restarted", "host_rebooted", "node_failed",
  "spawn_failed", "tokenizer_missing", "trainer_crashed", "publish_failed", "dataset_changed", "dataset_copy_failed",
  "dataset_invalid",
]);
export type ErrorCode = z.infer<typeof ErrorCode>;

// Why the supervisor stopped a run, recorded before the first signal is sent. A pause is a cancel that waited for
// the run's next saved state.
export const StopReason = z.enum(["cancel", "pause", "stalled", "timeout", "nan_loss"]);
export type StopReason = z.infer<typeof StopReason>;

export interface Outcome {
  status: TerminalStatus;
  exit_code: number | null;
  signal: string | null;
  forced_kill: boolean;
  error: string | null;
  error_code: ErrorCode | null;
  lora_path: string | null;
  lora_sha256: string | null;
  lora_bytes: number | null;
}

// What an outcome says of a trainer that never ran, or whose end was not seen.
const NO_RUN = {
  exit_code: null, signal: null, forced_kill: false, lora_path: null, lora_sha256: null, lora_bytes: null,
} as const;

// A failure the trainer's exit did not decide (it never started, or its end was not seen).
export function failedOutcome(code: ErrorCode, error: string): Outcome {
  return { status: "failed", error_code: code, error, ...NO_RUN };
}

// A job cancelled while it was prepared, before any process of it existed.
export function cancelledOutcome(): Outcome {
  return { status: "cancelled", error_code: null, error: null, ...NO_RUN };
}

/** A preview image of a run, as listed once it was a whole PNG file written by the run. */
export interface Sample {
  step: number;
  /** Which of the prompts file's entries it was drawn from (the recipe's template of that index). */
  index: number;
  name: string;
  path: string;
  bytes: number;
}

/** A verified intermediate LoRA. */
export interface Checkpoint {
  step: number;
  path: string;
  sha256: string;
  bytes: number;
}

/** What the record says can be resumed: the newest complete state and the intermediates beside it. */
export interface ResumePoint {
  step: number | null;
  state: string | null;
  /** The digest of the state's files when it was verified: a resume checks them again against it. */
  digest: string | null;
  checkpoints: Checkpoint[];
  gone: string | null;
}

// A step of the loss curve and its loss (null: not finite).
export type LossPoint = [step: number, loss: number | null];

/** An image named with what was found of it. */
export interface ImageSize {
  image: string;
  width: number;
  height: number;
}

/** An image sd-scripts scales up into its bucket, with the scale (above 1). */
export interface SmallImage extends ImageSize {
  scale: number;
}

/**
 * The text encoders' contexts sd-scripts can train on (train_util's `--max_token_length` choices: none, 150, 225):
 * one CLIP window of 75 tokens, two or three.
 */
export const TOKEN_WINDOWS = [75, 150, 225] as const;
/** The context a run trains on. */
export type TokenWindow = (typeof TOKEN_WINDOWS)[number];
/** One CLIP window: sd-scripts' own context, passed as no `--max_token_length`. */
export const ONE_WINDOW: TokenWindow = TOKEN_WINDOWS[0];
/** The longest context sd-scripts trains, and as far as a caption is counted. */
export const LONGEST_WINDOW: TokenWindow = TOKEN_WINDOWS[TOKEN_WINDOWS.length - 1]!;

/** How many notes of a dataset report's `files` are listed; the rest are counted. */
export const FILE_NOTES_LISTED = 50;

/** What preparing did to one file of the copy, named as it lies in arbo's dataset dir. */
export type FileNote =
  | { file: string; did: "trigger_added"; prefix: string }
  | { file: string; did: "trigger_moved"; prefix: string }
  | { file: string; did: "caption_kept" }
  | { file: string; did: "no_caption"; trains_on: string }
  | { file: string; did: "turned_upright"; stored_as: string }
  | { file: string; did: "small"; scale: number }
  | { file: string; did: "duplicate"; same_as: string };

/**
 * What the worker did to the job's own copy of the dataset before the trainer read it, and what it found; images
 * and captions are named as they lie in arbo's dataset dir. The fields marked "absent before" are missing from the
 * report of a job prepared by an older worker.
 */
export interface DatasetReport {
  captions: {
    /** Caption files whose trained line lacked the trigger as a whole word, and now starts `<trigger> <class>, `. */
    trigger_added: number;
    /** Caption files whose trained line held the trigger already, left as they were. */
    trigger_present: number;
    /** Caption files whose trigger lay past the trained window: they now start `<trigger> <class>, ` too. */
    trigger_moved?: number;
    /** Images with no caption file: sd-scripts trains them on `<trigger> <class>` (the subset's class_tokens). */
    images_without_caption: number;
    /**
     * Captions longer than the text encoders read: the words past the limit are not trained on. `tokens` is
     * counted up to 225 (the longest context sd-scripts trains) and is 226 for every caption longer.
     */
    cut: Array<{ caption: string; tokens: number }>;
    /** The CLIP tokenizer the trainer uses, or (with none on disk) a bound that never counts fewer tokens. */
    tokens_counted_by: "clip tokenizer" | "upper bound";
  };
  /** The smallest context that holds the longest trained caption (absent before: such a run trained on 225). */
  token_window?: { tokens: TokenWindow; longest: { caption: string; tokens: number } | null };
  /** Images stored turned or mirrored with an EXIF orientation, stored upright (as PNG) in the copy. */
  turned_upright: string[];
  /** Images sd-scripts scales up into their bucket, and the LoRA learns the blur (before: fewer pixels than the
   * resolution squared, without the scale). */
  small: Array<ImageSize | SmallImage>;
  /**
   * Images over Pillow's MAX_IMAGE_PIXELS (89,478,485) and within twice it: sd-scripts reads them, and Pillow warns
   * of a decompression bomb in the trainer's log. Absent from records written before it was kept.
   */
  large?: ImageSize[];
  /** Sets of images whose bytes are identical: each trains as often as the set is large. */
  duplicates: string[][];
  /** Per file, what was done, in file order: the first FILE_NOTES_LISTED (absent before). */
  files?: FileNote[];
  /** How many notes past those were left out of `files`. */
  files_not_listed?: number;
  /** What the request overrode: a kohya folder name naming another trigger or class (absent before). */
  warnings?: string[];
  /** Whose faces the photos show (SPEC §8): absent before, and for a request with `identity_check: "off"`. */
  identity?: DatasetIdentity;
}

/** A photo the identity check has a word about, named as it lies in arbo's dataset dir. */
export type IdentityNote =
  | { file: string; note: "no_face" }
  | { file: string; note: "several_faces"; faces: number }
  | { file: string; note: "other_person"; distance: number; threshold: number }
  | { file: string; note: "unreadable"; error: string };

// Why a dataset has no identity, a closed list: too few photos with one face (a dog, a product, a style), or the
// face scorer could not say.
export const IdentityUnscored = z.enum(["too_few_single_faces", "scorer_missing", "scorer_failed"]);
export type IdentityUnscored = z.infer<typeof IdentityUnscored>;

/** The dataset's identity: the mean embedding of its one-face photos, each judged against the others'. */
export interface DatasetIdentity {
  scored: boolean;
  /** Why not scored; null when scored. */
  reason: IdentityUnscored | null;
  /** Photos by the faces found in them. */
  photos: { one_face: number; no_face: number; several_faces: number };
  /** The mean of the one-face photos' leave-one-out distances; null when not scored. */
  spread: number | null;
  threshold: number;
  /** Per photo with something to say, in file order. */
  notes: IdentityNote[];
}

// Whether the LoRA shows the person (SPEC §8): the verdict at the run's end, read from the points at which its
// previews were scored. A verdict is information: it never changes the job's status.
export const LikenessVerdict = z.enum(["learned", "undertrained", "overfit", "not_scored"]);
export type LikenessVerdict = z.infer<typeof LikenessVerdict>;

// Why a run has no verdict, a closed list.
export const NotScoredReason = z.enum([
  "no_identity", "no_previews", "no_face_in_previews", "scorer_missing", "scorer_failed",
]);
export type NotScoredReason = z.infer<typeof NotScoredReason>;

/** What the faces of one subject's previews at a point came to (trigger or class alone). */
export interface LikenessSeries {
  /** The mean over its images with a face of each image's closest face to the identity; null: no face at all. */
  distance: number | null;
  /** Faces found in its images, all told. */
  faces: number;
  /** The preview images scored, by their sample names. */
  files: string[];
}

/** A preview point, scored against the dataset's identity. */
export interface LikenessPoint {
  step: number;
  trigger: LikenessSeries;
  class: LikenessSeries;
}

/** The run's likeness report: `verdict` is null while it runs. */
export interface Likeness {
  /** The distance at or under which a face is the person's (dlib's 0.6). */
  threshold: number;
  points: LikenessPoint[];
  verdict: LikenessVerdict | null;
  reason: NotScoredReason | null;
  /** The point with the closest trigger likeness whose class previews do not match; null when none. */
  best_step: number | null;
  /** The sha256 of the LoRA kept at best_step (a checkpoint of the record); null while it runs, or none kept. */
  best_sha256: string | null;
}
