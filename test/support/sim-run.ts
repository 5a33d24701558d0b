import { closeSync, openSync } from "node:fs";
import { mkdir, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { LAUNCH_FLAGS } from "../../src/recipe/command.ts";

const ENTRY = join(import.meta.dir, "simulate-entry.ts");
export const SCRIPT = "/opt/fluxgym/sd-scripts/sdxl_train_network.py";
// accelerate's own flags are the worker's own (LAUNCH_FLAGS), passed before the script.
export { LAUNCH_FLAGS };

export interface SimWorkspace extends AsyncDisposable {
  dir: string;
}

// A temp dir with what a simulated run reads: one image repeated `repeats` times at batch size 1 in dataset.toml,
// and a stand-in model.safetensors.
export async function simWorkspace(prefix: string, repeats: number): Promise<SimWorkspace> {
  const dir = await mkdtemp(join(tmpdir(), prefix));
  await mkdir(join(dir, "images"));
  await Bun.write(join(dir, "images", "0.png"), "not really a png");
  await Bun.write(join(dir, "model.safetensors"), "not really a model");
  const subsets = [{ image_dir: join(dir, "images"), num_repeats: repeats }];
  const config = { datasets: [{ resolution: 768, batch_size: 1, subsets }] };
  await Bun.write(join(dir, "dataset.toml"), Bun.TOML.stringify(config));
  return { dir, [Symbol.asyncDispose]: () => rm(dir, { recursive: true, force: true }) };
}

/** Where a simulated run reads its inputs (`model.safetensors`, `dataset.toml` in `dir`) and writes its output. */
export interface SimulatedRun {
  dir: string;
  outputDir: string;
  steps: number;
  /** Flags after the worker's own, the ones under test. */
  extra: string[];
  knobs?: Record<string, string>;
  logPath: string;
}

// The simulated trainer as the worker starts it, with the worker's flags; stdout and stderr share one file, as in
// the worker's job log (the child keeps its own copy of the fd).
export async function runSimulated(run: SimulatedRun): Promise<{ exitCode: number | null; log: string }> {
  const flags = [
    `--pretrained_model_name_or_path=${join(run.dir, "model.safetensors")}`,
    `--dataset_config=${join(run.dir, "dataset.toml")}`,
    `--output_dir=${run.outputDir}`,
    ...["--output_name=mylora", "--save_model_as=safetensors", "--network_module=networks.lora", "--network_dim=4"],
    ...[`--max_train_steps=${run.steps}`, "--seed=42", "--mixed_precision=bf16", "--console_log_simple"],
  ];
  const env = { LORA_WORKER_SIMULATE_SECONDS_PER_STEP: "0", ...run.knobs };
  const argv = [process.execPath, ENTRY, "launch", ...LAUNCH_FLAGS, SCRIPT, ...flags, ...run.extra];
  const log = openSync(run.logPath, "w");
  const proc = (() => {
    try {
      return Bun.spawn(argv, { stdin: "ignore", stdout: log, stderr: log, env });
    } finally {
      closeSync(log);
    }
  })();
  await proc.exited;
  return { exitCode: proc.exitCode, log: await Bun.file(run.logPath).text() };
}
