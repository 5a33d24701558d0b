// The flags of `accelerate launch` and of sd-scripts' sdxl_train_network.py that the worker passes, read
// as Python's argparse reads them (`--flag value` or `--flag=value`, switches, int/float/choices), but
// strictly: an unknown or abbreviated flag is an argparse error (`usage: ...`, `<prog>: error: ...`,
// exit 2), so a flag the worker misspells fails here as it would in sd-scripts (INV-T7).
import { fail, ok, type Result } from "../result.ts";

// A flag is a switch, takes a value of a type, or takes one of its choices (None: the default).
type Spec = "switch" | "str" | "int" | "float" | "int_or_float" | readonly (string | null)[];
type Values = Map<string, string | number | true>;

// Spelled here, not taken from config's TRAIN_SCRIPT: the simulator checks the worker's command as python would.
export const SCRIPT_NAME = "sdxl_train_network.py";
// networks.lora falls back to rank 4 when --network_dim is absent.
export const DEFAULT_NETWORK_DIM = 4;
const LAUNCH_PROG = "accelerate <command> [<args>] launch";
const NEGATIVE_NUMBER = /^-\d+$|^-\d*\.\d+$/;

const LAUNCH_OPTIONS: Record<string, Spec> = {
  num_processes: "int", num_machines: "int", mixed_precision: ["no", "fp16", "bf16", "fp8"], dynamo_backend: "str",
  num_cpu_threads_per_process: "int",
};

const SCRIPT_OPTIONS = {
  console_log_simple: "switch", pretrained_model_name_or_path: "str", tokenizer_cache_dir: "str",
  dataset_config: "str", output_dir: "str",
  output_name: "str", save_model_as: [null, "ckpt", "pt", "safetensors"],
  save_precision: [null, "float", "fp16", "bf16"],
  network_module: "str", network_dim: "int", network_alpha: "float", network_train_unet_only: "switch",
  learning_rate: "float", unet_lr: "float", optimizer_type: "str", lr_scheduler: "str", lr_warmup_steps: "int_or_float",
  max_train_steps: "int", seed: "int", mixed_precision: ["no", "fp16", "bf16"], gradient_checkpointing: "switch",
  sdpa: "switch", cache_latents: "switch", cache_latents_to_disk: "switch", cache_text_encoder_outputs: "switch",
  min_snr_gamma: "float", noise_offset: "float", max_token_length: [null, "150", "225"],
  max_data_loader_n_workers: "int",
  metadata_title: "str", metadata_trigger_phrase: "str",
  persistent_data_loader_workers: "switch", caption_extension: "str", save_every_n_steps: "int", save_state: "switch",
  save_last_n_steps: "int", save_last_n_steps_state: "int", resume: "str", skip_until_initial_step: "switch",
  sample_every_n_steps: "int", sample_prompts: "str",
  sample_sampler: ["ddim", "pndm", "lms", "euler", "euler_a", "heun", "dpm_2", "dpm_2_a", "dpmsolver", "dpmsolver++",
    "dpmsingle", "k_lms", "k_euler", "k_euler_a", "k_dpm_2", "k_dpm_2_a"],
} as const satisfies Record<string, Spec>;

// sd-scripts' argparse namespace: a flag's value, None (null) when it is absent, False for a switch; and the
// defaults the simulator reads.
export type ScriptArgs = ReturnType<typeof scriptArgs>;
type Namespace = { [Name in keyof typeof SCRIPT_OPTIONS]: Value<(typeof SCRIPT_OPTIONS)[Name]> };
type Value<S> = S extends "switch" ? boolean : S extends "str" | readonly unknown[] ? string | null : number | null;

// The launch flags, then the script and everything after it, untouched (argparse.REMAINDER). On failure,
// what argparse writes to stderr before it exits USAGE_EXIT; so for parseScriptArgs.
export function parseLaunch(args: string[]): Result<{ script: string; scriptArgs: string[] }> {
  const parsed = parseOptions(args, LAUNCH_OPTIONS, true);
  const usage = (why: string) => argparseError(`${LAUNCH_PROG} [options] training_script ...`, LAUNCH_PROG, why);
  if (!parsed.ok) return usage(parsed.error);
  const [script, ...scriptArgs] = parsed.value.rest;
  if (script === undefined) return usage("the following arguments are required: training_script, training_script_args");
  return ok({ script, scriptArgs });
}

// `randomSeed` stands in for sd-scripts' random.randint(0, 2**32) when --seed is absent.
export function parseScriptArgs(args: string[], randomSeed: () => number): Result<ScriptArgs> {
  const parsed = parseOptions(args, SCRIPT_OPTIONS, false);
  if (!parsed.ok) return argparseError(`${SCRIPT_NAME} [options]`, SCRIPT_NAME, parsed.error);
  return ok(scriptArgs(parsed.value.values, randomSeed));
}

function scriptArgs(values: Values, randomSeed: () => number) {
  const absent = (spec: Spec) => (spec === "switch" ? false : null);
  const given = Object.entries(SCRIPT_OPTIONS).map(([name, spec]) => [name, values.get(name) ?? absent(spec)]);
  const args = Object.fromEntries(given) as Namespace;
  return {
    ...args,
    network_alpha: args.network_alpha ?? 1,
    max_train_steps: args.max_train_steps ?? 1600,
    seed: args.seed ?? randomSeed(),
    caption_extension: args.caption_extension ?? ".caption",
  };
}

// With `stopAtPositional`, parsing ends at the first non-flag and `rest` holds it and all after it;
// otherwise every non-flag is an unrecognized argument.
function parseOptions(args: string[], specs: Record<string, Spec>, stopAtPositional: boolean) {
  const values: Values = new Map();
  const unrecognized: string[] = [];
  let rest: string[] = [];
  for (let index = 0; index < args.length; index += 1) {
    const arg = args[index]!;
    if (!arg.startsWith("-") && stopAtPositional) {
      rest = args.slice(index);
      break;
    }
    const equals = arg.indexOf("=");
    const [flag, inline] = equals < 0 ? [arg, undefined] : [arg.slice(0, equals), arg.slice(equals + 1)];
    const name = flag.slice(2);
    const spec = flag.startsWith("--") && Object.hasOwn(specs, name) ? specs[name]! : null;
    if (spec === null) unrecognized.push(arg);
    else if (spec === "switch") {
      if (inline !== undefined) return fail(`argument ${flag}: ignored explicit argument ${pyStrRepr(inline)}`);
      values.set(name, true);
    } else {
      // argparse reads a following "-x" as the next flag unless it looks like a negative number.
      const next = args[index + 1];
      const raw = inline ?? (next?.startsWith("-") && !NEGATIVE_NUMBER.test(next) ? undefined : next);
      if (raw === undefined) return fail(`argument ${flag}: expected one argument`);
      if (inline === undefined) index += 1;
      const value = convert(raw, spec);
      if (!value.ok) return fail(`argument ${flag}: ${value.error}`);
      values.set(name, value.value);
    }
  }
  if (unrecognized.length > 0) return fail(`unrecognized arguments: ${unrecognized.join(" ")}`);
  return ok({ values, rest });
}

// Python's int() and float() for the plain decimal forms the worker writes, or argparse's complaint.
function convert(raw: string, spec: Exclude<Spec, "switch">): Result<string | number> {
  if (typeof spec !== "string") {
    const allowed = spec.map((choice) => (choice === null ? "None" : pyStrRepr(choice))).join(", ");
    return spec.includes(raw) ? ok(raw) : fail(`invalid choice: ${pyStrRepr(raw)} (choose from ${allowed})`);
  }
  if (spec === "str") return ok(raw);
  if (/^[+-]?\d+$/.test(raw)) return ok(Number(raw));
  if (spec !== "int" && /^[+-]?(\d+\.?\d*|\.\d+)(e[+-]?\d+)?$/i.test(raw)) return ok(Number(raw));
  return fail(`invalid ${spec} value: ${pyStrRepr(raw)}`);
}

function argparseError(usage: string, prog: string, message: string) {
  return fail(`usage: ${usage}\n${prog}: error: ${message}\n`);
}

// `repr(s)` for a str: single quotes unless the text holds a single quote and no double quote.
export function pyStrRepr(text: string): string {
  const quote = text.includes("'") && !text.includes('"') ? '"' : "'";
  const escapes = { [quote]: `\\${quote}`, "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t" };
  return quote + text.replace(/[\\'"\n\r\t]/g, (char) => escapes[char] ?? char) + quote;
}
