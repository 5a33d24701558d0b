import type { ErrorCode, LikenessVerdict } from "../job.ts";

/** What to do about a job that failed with one code. */
export interface NextStep {
  /** docs/troubleshooting.md's "what to do" for the code, word for word (test/unit/next-steps.test.ts): `steps`
   * joined by a space. */
  text: string;
  /** The same, a sentence each, in the order to try them: the page's list and the CLI's. */
  steps: string[];
  /** Sending the request again on another card or a lighter tier is the better first move than a resume on the same
   * card (which may well fail the same way). */
  retry_elsewhere: boolean;
}

// A code's steps, and its text made from them: one source for the record, the page and the CLI.
const next = (retryElsewhere: boolean, ...steps: string[]): NextStep =>
  ({ text: steps.join(" "), steps, retry_elsewhere: retryElsewhere });

// One table, the page's and the record's: a failed job's card says what to do, in the order to try it.
export const NEXT_STEPS: Record<ErrorCode, NextStep> = {
  cuda_oom: next(
    true,
    "send the request again on a card with more free memory (the 48 GB device) or a lighter tier: a resume on the " +
      "same card may well run out again.",
    "`lora-worker gpu` shows who holds the memory; raise `gpu.vram_need_mib` so admission waits for room.",
    "Then, when it saved a state, resume it; after a failure while sampling, resume without previews (`{\"samples\": " +
      "0}`, `lora-worker resume ID --samples 0`, the page's button)",
  ),
  host_oom_killed: next(
    false,
    "give the host (or the Slurm job: `slurm.mem`) more memory; never bound it with the unit's `MemoryMax=`",
  ),
  nan_loss: next(
    false,
    "a diverged run: send it again with a lower `repeats` or another seed; a resume goes on from the last finite " +
      "state",
  ),
  dataset_empty: next(
    false,
    "check the dataset: images directly in `dataset_dir` or in one `<repeats>_<trigger> <class>` folder",
  ),
  base_model_invalid: next(
    false,
    "point `base_model_path` at the SDXL base checkpoint; `lora-worker plan` checks a request without running it",
  ),
  tokenizer_missing: next(
    false,
    "`lora-worker tokenizers write` (or `tokenizers import PATH`), then `lora-worker doctor` " +
      "(operating: \"Prove a deployment\")",
  ),
  stalled: next(
    false,
    "a hung driver or a stuck filesystem: look at the log's tail (`lora-worker logs ID`) and `nvidia-smi`.",
    "The state it saved last is resumable",
  ),
  timeout: next(false, "a slower GPU than the bound assumes: raise the tier's bound, or resume from its last state"),
  output_missing: next(
    false,
    "a trainer that is not sd-scripts' `sdxl_train_network.py`: check `trainer.sd_scripts_dir` and the log",
  ),
  output_invalid: next(false, "the disk filled or the trainer was cut short: free room and send the request again"),
  disk_full: next(
    false,
    "free room (retention: `retention.keep_days`, `keep_last`); the job is resumable when it saved a state",
  ),
  publish_failed: next(
    false,
    "the LoRA is kept in the job's run directory; remove or rename what the `error` names, then send the request " +
      "again",
  ),
  dataset_changed: next(
    false,
    "arbo wrote into the folder after dispatching: finish writing first, then send the request again",
  ),
  dataset_copy_failed: next(
    false,
    "the `error` says why: usually the state dir's permissions or filesystem; `lora-worker doctor`",
  ),
  dataset_invalid: next(
    false,
    "the `error` names the file as it lies in `dataset_dir`: fix or remove it in arbo and send the job again",
  ),
  spawn_failed: next(
    false,
    "the `error` names the cause: a missing `trainer.accelerate`, no file descriptors, Slurm's refusal, the " +
      "trainer's `TMPDIR` link in `/dev/shm` that could not be made (`lora-worker doctor` checks it).",
    "Fix it and send again",
  ),
  worker_restarted: next(
    false,
    "nothing was lost that a resume cannot take: resume from the last state, or send the request again (a resume " +
      "cut short in `preparing`: resume its predecessor again).",
    "Where the `error` names Slurm, fix `trainer.backend` or `slurm.bin_dir` and `scancel` the Slurm job it names " +
      "if a cluster still runs it",
  ),
  host_rebooted: next(false, "resume from the last state, or send the request again"),
  node_failed: next(false, "resume from the last state on another node"),
  trainer_crashed: next(false, "read the `error`; a Python traceback names the cause"),
};

// What to do with each likeness verdict (docs/troubleshooting.md's likeness table, word for word): a verdict never
// fails the job, so its card says it beside the LoRA.
export const LIKENESS_STEPS: Record<LikenessVerdict, string> = {
  learned: "use the LoRA; `best_url` serves the preview point's LoRA that looked most like the person, which may " +
    "be an earlier one than the final",
  undertrained: "train longer (a higher tier, or more `repeats`); check the dataset's identity notes for photos of " +
    "someone else, and that the trigger is a rare word",
  overfit: "take the LoRA of `best_step` (`best_url`), before the class previews showed the person, or train again " +
    "with fewer `repeats` or a lower tier",
  not_scored: "the `reason` says why: `no_identity` (fewer than half the photos show one face: a pet, a product, a " +
    "style), `no_previews` (ask for `samples`), `no_face_in_previews`, `scorer_missing` (`lora-worker trainer " +
    "check` names the fix), `scorer_failed` (the worker's log says why); judge the previews by eye",
};
