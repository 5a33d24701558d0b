import type { ErrorCode, LikenessVerdict } from "../job.ts";

/** What to do about a job that failed with one code. */
export interface NextStep {
  /** docs/troubleshooting.md's "what to do" for the code, word for word (test/unit/next-steps.test.ts). */
  text: string;
  /** Sending the request again on another card or a lighter tier is the better first move than a resume on the same
   * card (which may well fail the same way). */
  retry_elsewhere: boolean;
}

// One table, the page's and the record's: a failed job's card says what to do, in the order to try it.
export const NEXT_STEPS: Record<ErrorCode, NextStep> = {
  cuda_oom: {
    retry_elsewhere: true,
    text: "send the request again on a card with more free memory (the 48 GB device) or a lighter tier: a resume on " +
      "the same card may well run out again. `lora-worker gpu` shows who holds the memory; raise " +
      "`gpu.vram_need_mib` so admission waits for room. Then, when it saved a state, resume it; after a failure " +
      "while sampling, resume without previews (`{\"samples\": 0}`, `lora-worker resume ID --samples 0`, the " +
      "page's button)",
  },
  host_oom_killed: {
    retry_elsewhere: false,
    text: "give the host (or the Slurm job: `slurm.mem`) more memory; never bound it with the unit's `MemoryMax=`",
  },
  nan_loss: {
    retry_elsewhere: false,
    text: "a diverged run: send it again with a lower `repeats` or another seed; a resume goes on from the last " +
      "finite state",
  },
  dataset_empty: {
    retry_elsewhere: false,
    text: "check the dataset: images directly in `dataset_dir` or in one `<repeats>_<trigger> <class>` folder",
  },
  base_model_invalid: {
    retry_elsewhere: false,
    text: "point `base_model_path` at the SDXL base checkpoint; `lora-worker plan` checks a request without running " +
      "it",
  },
  tokenizer_missing: {
    retry_elsewhere: false,
    text: "`lora-worker tokenizers write` (or `tokenizers import PATH`), then `lora-worker doctor` " +
      "(operating: \"Prove a deployment\")",
  },
  stalled: {
    retry_elsewhere: false,
    text: "a hung driver or a stuck filesystem: look at the log's tail (`lora-worker logs ID`) and `nvidia-smi`; the " +
      "state it saved last is resumable",
  },
  timeout: {
    retry_elsewhere: false,
    text: "a slower GPU than the bound assumes: raise the tier's bound, or resume from its last state",
  },
  output_missing: {
    retry_elsewhere: false,
    text: "a trainer that is not sd-scripts' `sdxl_train_network.py`: check `trainer.sd_scripts_dir` and the log",
  },
  output_invalid: {
    retry_elsewhere: false,
    text: "the disk filled or the trainer was cut short: free room and send the request again",
  },
  disk_full: {
    retry_elsewhere: false,
    text: "free room (retention: `retention.keep_days`, `keep_last`); the job is resumable when it saved a state",
  },
  publish_failed: {
    retry_elsewhere: false,
    text: "the LoRA is kept in the job's run directory; remove or rename what the `error` names, then send the " +
      "request again",
  },
  dataset_changed: {
    retry_elsewhere: false,
    text: "arbo wrote into the folder after dispatching: finish writing first, then send the request again",
  },
  dataset_copy_failed: {
    retry_elsewhere: false,
    text: "the `error` says why: usually the state dir's permissions or filesystem; `lora-worker doctor`",
  },
  dataset_invalid: {
    retry_elsewhere: false,
    text: "the `error` names the file as it lies in `dataset_dir`: fix or remove it in arbo and send the job again",
  },
  spawn_failed: {
    retry_elsewhere: false,
    text: "the `error` names the cause: a missing `trainer.accelerate`, no file descriptors, Slurm's refusal, the " +
      "trainer's `TMPDIR` link in `/dev/shm` that could not be made (`lora-worker doctor` checks it); fix it and " +
      "send again",
  },
  worker_restarted: {
    retry_elsewhere: false,
    text: "nothing was lost that a resume cannot take: resume from the last state, or send the request again (a " +
      "resume cut short in `preparing`: resume its predecessor again); where the `error` names Slurm, fix " +
      "`trainer.backend` or `slurm.bin_dir` and `scancel` the Slurm job it names if a cluster still runs it",
  },
  host_rebooted: {
    retry_elsewhere: false,
    text: "resume from the last state, or send the request again",
  },
  node_failed: {
    retry_elsewhere: false,
    text: "resume from the last state on another node",
  },
  trainer_crashed: {
    retry_elsewhere: false,
    text: "read the `error`; a Python traceback names the cause",
  },
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
