// `accelerate launch <launch flags> <script> <script flags>`: the launch flags the worker uses,
// then the training script and everything after it, untouched.
import { formatArgparseError, parseOptions, type OptionSpec } from "./argparse.ts";

export interface Launch {
  script: string;
  scriptArgs: string[];
  defaultsWarning: string | null;
}

export type LaunchResult = { ok: true; launch: Launch } | { ok: false; stderr: string };

const PROG = "accelerate <command> [<args>] launch";
const POSITIONALS = ["training_script", "..."];

const LAUNCH_OPTIONS: Record<string, OptionSpec> = {
  num_processes: { kind: "value", type: "int" },
  num_machines: { kind: "value", type: "int" },
  mixed_precision: { kind: "value", type: "str", choices: ["no", "fp16", "bf16", "fp8"] },
  dynamo_backend: { kind: "value", type: "str" },
  num_cpu_threads_per_process: { kind: "value", type: "int" },
};

// accelerate warns for each of these it had to default, when no `accelerate config` file exists.
const DEFAULTED_VALUES: ReadonlyArray<[string, string]> = [
  ["num_processes", "1"],
  ["num_machines", "1"],
  ["mixed_precision", "'no'"],
  ["dynamo_backend", "'no'"],
];

export function parseLaunch(args: string[]): LaunchResult {
  const parsed = parseOptions(args, LAUNCH_OPTIONS, true);
  if (!parsed.ok) return usageError(parsed.message);
  const [script, ...scriptArgs] = parsed.rest;
  if (script === undefined) return usageError("the following arguments are required: training_script, training_script_args");
  const defaulted = DEFAULTED_VALUES.filter(([name]) => !parsed.values.has(name));
  return { ok: true, launch: { script, scriptArgs, defaultsWarning: defaultsWarning(defaulted) } };
}

function defaultsWarning(defaulted: ReadonlyArray<[string, string]>): string | null {
  if (defaulted.length === 0) return null;
  return [
    "The following values were not passed to `accelerate launch` and had defaults used instead:",
    ...defaulted.map(([name, value]) => `\t\`--${name}\` was set to a value of \`${value}\``),
    "To avoid this warning pass in values for each of the problematic parameters or run `accelerate config`.",
  ].join("\n");
}

function usageError(message: string): LaunchResult {
  return { ok: false, stderr: formatArgparseError(PROG, LAUNCH_OPTIONS, POSITIONALS, message) };
}
