import type { ErrorCode } from "../job.ts";

// What sd-scripts, torch and accelerate print when a run fails, in the order SPEC §4 lists them: the first
// signature found in the log names the failure, and the line it matched leads the job's `error`.
interface Signature {
  code: ErrorCode;
  // Tested against the log's tail as one text, so it may span the lines of a traceback.
  pattern: RegExp;
  what: string;
  // The line that leads the error, where `pattern` spans lines; else the last line `pattern` matches.
  lead?: RegExp;
}

// One pattern from alternatives written one a line.
const anyOf = (flags: string, ...alternatives: RegExp[]) =>
  new RegExp(alternatives.map((a) => a.source).join("|"), flags);

export const SIGNATURES: readonly Signature[] = [
  {
    code: "cuda_oom",
    // torch's allocator ("CUDA out of memory", OutOfMemoryError), the CUDA runtime ("CUDA error: out of memory"),
    // and CUDA libraries that could not allocate their workspace; "an illegal memory access" is none of these.
    pattern: anyOf(
      "i",
      /CUDA out of memory/,
      /torch\.(?:cuda\.)?OutOfMemoryError/,
      /CUDA error: out of memory/,
      /CUBLAS_STATUS_ALLOC_FAILED/,
      /CUDNN_STATUS_(?:ALLOC_FAILED|NOT_ENOUGH_MEMORY)/,
      /cuDNN error: .*not enough memory/,
    ),
    what: "the GPU ran out of memory",
  },
  { code: "disk_full", pattern: /No space left on device/, what: "the disk filled up (No space left on device)" },
  { code: "dataset_empty", pattern: /No data found\./, what: "sd-scripts found no training data (No data found.)" },
  {
    code: "base_model_invalid",
    pattern: anyOf(
      "",
      /is neither a valid local path nor a valid repo id/,
      /Error while deserializing header/,
      /HeaderTooLarge/,
      /invalid load key/,
      /Error\(s\) in loading state_dict for SdxlUNet2DConditionModel/,
    ),
    what: "the base model could not be loaded",
  },
  {
    code: "tokenizer_missing",
    // Offline with no folder under --tokenizer_cache_dir, sd-scripts falls back to the hub id; transformers 4.54
    // then opens a vocab_file of None in CLIPTokenizer.__init__ (older ones said "Can't load tokenizer for").
    pattern: anyOf(
      "",
      /in _load_tokenizer\n[\s\S]{0,4000}?TypeError: expected str, bytes or os\.PathLike object, not NoneType/,
      /Can't load tokenizer for '(?:openai\/clip-vit-large-patch14|laion\/CLIP-ViT-bigG-14-laion2B-39B-b160k)'/,
    ),
    lead: /TypeError: expected str, bytes or os\.PathLike object, not NoneType|Can't load tokenizer for/,
    what: "the trainer could not load a CLIP tokenizer offline: it is not in trainer.tokenizer_dir " +
      "(fix: lora-worker tokenizers write, or tokenizers import PATH, then lora-worker doctor)",
  },
  {
    code: "host_oom_killed",
    // The kernel's OOM killer kills accelerate's Python child; accelerate reports it and exits 1.
    pattern: /died with <Signals\.SIGKILL: 9>/,
    what: "the training process was killed by SIGKILL from outside the worker (most likely the kernel's OOM killer)",
  },
];

// accelerate's own traceback after a failed child: its frames, and the child's whole argv, say nothing the
// trainer's traceback has not said, and the argv is full of host paths.
const LAUNCHER_FRAME = /[\\/](?:accelerate[\\/]commands[\\/]|bin[\\/]accelerate\b)|accelerate-script\.py/;

// The last line that matched; a launcher's CalledProcessError keeps its verdict, not the argv it quotes.
export function decisiveLine(lines: readonly string[], pattern: RegExp): string | null {
  for (let i = lines.length - 1; i >= 0; i--) {
    if (pattern.test(lines[i]!)) return lines[i]!.trim().replace(/Command '\[.*\]'/, "Command '[…]'");
  }
  return null;
}

// The log without the launcher's traceback frames (a frame is its `File` line and the indented lines under it).
export function withoutLauncherFrames(lines: readonly string[]): string[] {
  const kept: string[] = [];
  let skipping = false;
  for (const line of lines) {
    if (/^\s*File "/.test(line)) skipping = LAUNCHER_FRAME.test(line);
    else if (!/^\s{4,}\S/.test(line)) skipping = false;
    if (!skipping && !/^subprocess\.CalledProcessError: Command '\[/.test(line)) kept.push(line);
  }
  return kept;
}
