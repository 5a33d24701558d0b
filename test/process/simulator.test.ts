import { describe, expect, test } from "bun:test";
import type { Subprocess } from "bun";
import { closeSync, existsSync, openSync, readFileSync } from "node:fs";
import { mkdir, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { verifySafetensors } from "../../src/safetensors/verify.ts";
import { listPids, readProcStat } from "../../src/os/proc.ts";
import { liveGroupMembers, signalGroup } from "../../src/os/terminate.ts";
import { waitFor } from "../support/wait.ts";
import { LAUNCH_FLAGS, SCRIPT } from "../support/sim-run.ts";

const ENTRY = join(import.meta.dir, "../support", "simulate-entry.ts");
const WAIT_LIMIT_MS = 10_000;
// Longer than a wait, so a wait that never ends fails with what it waited for.
const MISBEHAVIOUR_TIMEOUT_MS = 20_000;

interface Workspace extends AsyncDisposable {
  dir: string;
  lora: string;
}

// A job as the worker lays it out: images, a base model, the dataset TOML, an output dir to be.
async function workspace(images: number): Promise<Workspace> {
  const dir = await mkdtemp(join(tmpdir(), "simulator-"));
  await mkdir(join(dir, "images"));
  for (let index = 0; index < images; index += 1) {
    await Bun.write(join(dir, "images", `${index}.png`), "not really a png");
  }
  await Bun.write(join(dir, "model.safetensors"), "not really a model");
  const subsets = [{ image_dir: join(dir, "images"), class_tokens: "ohwx person", num_repeats: 10 }];
  const datasets = [{ resolution: 768, batch_size: 1, enable_bucket: true, subsets }];
  const config = { general: { caption_extension: ".txt" }, datasets };
  await Bun.write(join(dir, "dataset.toml"), Bun.TOML.stringify(config));
  const dispose = () => rm(dir, { recursive: true, force: true });
  return { dir, lora: join(dir, "out", "mylora.safetensors"), [Symbol.asyncDispose]: dispose };
}

// The worker's exact argv; `changes` replaces a flag's value, or drops the flag when false.
function launchArgv(dir: string, changes: Record<string, string | false> = {}, extra: string[] = []): string[] {
  const flags = [
    `--pretrained_model_name_or_path=${join(dir, "model.safetensors")}`,
    `--dataset_config=${join(dir, "dataset.toml")}`,
    `--output_dir=${join(dir, "out")}`,
    ...["--output_name=mylora", "--save_model_as=safetensors", "--save_precision=fp16"],
    ...["--network_module=networks.lora", "--network_dim=16", "--network_alpha=8", "--network_train_unet_only"],
    ...["--learning_rate=0.0001", "--unet_lr=0.0001", "--optimizer_type=AdamW8bit", "--lr_scheduler=cosine"],
    ...["--lr_warmup_steps=0", "--max_train_steps=20", "--seed=42"],
    ...["--mixed_precision=bf16", "--gradient_checkpointing", "--sdpa", "--cache_latents", "--cache_latents_to_disk"],
    ...["--cache_text_encoder_outputs", "--min_snr_gamma=5", "--noise_offset=0.1", "--max_data_loader_n_workers=1"],
    ...["--persistent_data_loader_workers", "--console_log_simple", "--caption_extension=.txt"],
  ];
  const changed = flags.flatMap((flag) => {
    const change = changes[flag.slice(2).split("=")[0]!];
    if (change === undefined) return [flag];
    return change === false ? [] : [`--${flag.slice(2).split("=")[0]}=${change}`];
  });
  return ["launch", ...LAUNCH_FLAGS, SCRIPT, ...changed, ...extra];
}

// stdout and stderr share one file, as in the worker's job log; the trainer leads its own process
// group, as the worker starts it.
function startSimulator(dir: string, argv: string[], knobs: Record<string, string> = {}) {
  const logPath = join(dir, "train.log");
  const log = openSync(logPath, "w");
  try {
    const env = { LORA_WORKER_SIMULATE_SECONDS_PER_STEP: "0", ...knobs };
    const stdio = { stdin: "ignore", stdout: log, stderr: log } as const;
    const proc = Bun.spawn([process.execPath, ENTRY, ...argv], { ...stdio, env, detached: true });
    return { proc, logPath };
  } finally {
    closeSync(log);
  }
}

async function simulate(dir: string, argv: string[], knobs: Record<string, string> = {}) {
  const { proc, logPath } = startSimulator(dir, argv, knobs);
  await proc.exited;
  return { exitCode: proc.exitCode, signalCode: proc.signalCode, log: await Bun.file(logPath).text() };
}

// The avr_loss each step ended on: the last `steps:` redraw showing that step.
function lossesByStep(log: string): string[] {
  const losses: string[] = [];
  for (const [, step, loss] of log.matchAll(/\| (\d+)\/\d+ \[[^\]]*avr_loss=([^\]]+)\]/g)) {
    losses[Number(step) - 1] = loss!;
  }
  return losses;
}

describe("the simulated trainer", () => {
  test("a complete run prints sd-scripts' progress and saves a verified LoRA marked as simulated", async () => {
    await using job = await workspace(3);
    const run = await simulate(job.dir, launchArgv(job.dir));
    expect(run.exitCode).toBe(0);
    expect(run.log).toContain("  total optimization steps / 学習ステップ数: 20\n");
    expect(run.log).toContain("\rsteps:  10%|█         | 2/20 [00:00<");
    expect(run.log).toMatch(/\rsteps: 100%\|██████████\| 20\/20 \[00:00<00:00, +[\d.]+it\/s, avr_loss=[\d.]+\]/);
    const bar = run.log.slice(run.log.indexOf("\rsteps:   5%"), run.log.indexOf("\nsaving checkpoint"));
    expect(bar).not.toContain("\n");
    expect(run.log).toContain(`\nsaving checkpoint: ${job.lora}\nmodel saved.\n`);
    const verdict = await verifySafetensors(job.lora);
    expect(verdict).toMatchObject({ ok: true, value: { tensorCount: 9 } });
    if (!verdict.ok) return;
    expect(verdict.value.metadata).toMatchObject({
      lora_worker_simulated: "true",
      ss_network_module: "networks.lora",
      ss_network_dim: "16",
      ss_network_alpha: "8.0",
      ss_max_train_steps: "20",
      ss_seed: "42",
      ss_base_model_version: "sdxl_base_v1-0",
      ss_num_train_images: "30",
      ss_output_name: "mylora",
    });
  });

  test("flags are read the same whether written --flag=value or --flag value", async () => {
    await using job = await workspace(3);
    const split = (arg: string) => (arg.startsWith("--") && arg.includes("=") ? arg.split(/=(.*)/s, 2) : [arg]);
    const spaced = launchArgv(job.dir).flatMap(split);
    expect(spaced).toContain("--max_train_steps");
    const run = await simulate(job.dir, spaced);
    expect(run.exitCode).toBe(0);
    expect(run.log).toContain("  total optimization steps / 学習ステップ数: 20\n");
    expect((await verifySafetensors(job.lora)).ok).toBe(true);
  });

  test("the same seed gives the same loss curve and another seed does not", async () => {
    await using job = await workspace(3);
    const first = lossesByStep((await simulate(job.dir, launchArgv(job.dir, { output_name: "a" }))).log);
    const again = lossesByStep((await simulate(job.dir, launchArgv(job.dir, { output_name: "b" }))).log);
    const other = lossesByStep((await simulate(job.dir, launchArgv(job.dir, { output_name: "c", seed: "7" }))).log);
    expect(first).toHaveLength(20);
    expect(again).toEqual(first);
    expect(other).not.toEqual(first);
  });

  test("an empty dataset logs No data found and exits 0 without writing anything", async () => {
    await using job = await workspace(0);
    const run = await simulate(job.dir, launchArgv(job.dir));
    expect(run.exitCode).toBe(0);
    expect(run.log).toContain("No data found. Please verify arguments (train_data_dir must be the parent of folders");
    expect(run.log).not.toContain("saving checkpoint");
    expect(existsSync(join(job.dir, "out"))).toBe(false);
  });

  test("a missing base model fails with diffusers' message and accelerate exits 1", async () => {
    await using job = await workspace(3);
    const missing = join(job.dir, "missing.safetensors");
    const run = await simulate(job.dir, launchArgv(job.dir, { pretrained_model_name_or_path: missing }));
    expect(run.exitCode).toBe(1);
    const why = `pretrained_model_name_or_path "${missing}" is neither a valid local path nor a valid repo id.`;
    expect(run.log).toContain(`ValueError: The provided ${why}`);
    expect(run.log).toContain("returned non-zero exit status 1.\n");
    expect(await Bun.file(job.lora).exists()).toBe(false);
  });

  test("a missing dataset config fails with sd-scripts' file-not-found error", async () => {
    await using job = await workspace(3);
    const missing = join(job.dir, "missing.toml");
    const run = await simulate(job.dir, launchArgv(job.dir, { dataset_config: missing }));
    expect(run.exitCode).toBe(1);
    expect(run.log).toContain(`ValueError: file not found / ファイルが見つかりません: ${missing}\n`);
  });

  test("caching text encoder outputs while training the text encoder trips sd-scripts' assertion", async () => {
    await using job = await workspace(3);
    const run = await simulate(job.dir, launchArgv(job.dir, { network_train_unet_only: false }));
    expect(run.exitCode).toBe(1);
    const assertion = "AssertionError: network for Text Encoder cannot be trained with caching Text Encoder outputs";
    expect(run.log).toContain(assertion);
  });

  test("an abbreviated script flag is an argparse error: the trainer exits 2 and accelerate 1", async () => {
    await using job = await workspace(3);
    const run = await simulate(job.dir, launchArgv(job.dir, {}, ["--network_modul=x"]));
    expect(run.exitCode).toBe(1);
    expect(run.log).toContain("\nsdxl_train_network.py: error: unrecognized arguments: --network_modul=x\n");
    expect(run.log).toContain("returned non-zero exit status 2.\n");
  });

  test("an unknown launch flag is accelerate's own argparse error and exits 2", async () => {
    await using job = await workspace(3);
    const [launch, ...rest] = launchArgv(job.dir);
    const run = await simulate(job.dir, [launch!, "--num_procs=1", ...rest]);
    expect(run.exitCode).toBe(2);
    expect(run.log).toContain("accelerate <command> [<args>] launch: error: unrecognized arguments: --num_procs=1\n");
    expect(run.log).not.toContain("Traceback");
  });

  test("a script other than sdxl_train_network.py cannot be opened, as python reports it", async () => {
    await using job = await workspace(3);
    const argv = launchArgv(job.dir).map((arg) => (arg === SCRIPT ? "/opt/fluxgym/sd-scripts/train.py" : arg));
    const run = await simulate(job.dir, argv);
    expect(run.exitCode).toBe(1);
    const error = "can't open file '/opt/fluxgym/sd-scripts/train.py': [Errno 2] No such file or directory\n";
    expect(run.log).toContain(error);
  });

  test("oom@3 fails at step 3 with PyTorch's CUDA out of memory error and saves nothing", async () => {
    await using job = await workspace(3);
    const run = await simulate(job.dir, launchArgv(job.dir), { LORA_WORKER_SIMULATE_FAIL: "oom@3" });
    expect(run.exitCode).toBe(1);
    expect(run.log).toContain("\ntorch.OutOfMemoryError: CUDA out of memory. Tried to allocate");
    expect(lossesByStep(run.log)).toHaveLength(2);
    expect(await Bun.file(job.lora).exists()).toBe(false);
  });

  test("nan@5 turns avr_loss to nan from step 5 on, and the run still saves", async () => {
    await using job = await workspace(3);
    const run = await simulate(job.dir, launchArgv(job.dir), { LORA_WORKER_SIMULATE_FAIL: "nan@5" });
    expect(run.exitCode).toBe(0);
    const losses = lossesByStep(run.log);
    expect(losses.slice(0, 4).every((loss) => Number.isFinite(Number(loss)))).toBe(true);
    expect(losses.slice(4)).toEqual(Array(16).fill("nan"));
    expect((await verifySafetensors(job.lora)).ok).toBe(true);
  });

  test("exit@N:CODE ends the trainer with CODE; accelerate turns non-zero into 1 and passes 0 through", async () => {
    await using job = await workspace(3);
    const crashed = await simulate(job.dir, launchArgv(job.dir), { LORA_WORKER_SIMULATE_FAIL: "exit@3:7" });
    expect(crashed.exitCode).toBe(1);
    expect(crashed.log).toContain("returned non-zero exit status 7.\n");
    const quiet = await simulate(job.dir, launchArgv(job.dir), { LORA_WORKER_SIMULATE_FAIL: "exit@3:0" });
    expect(quiet.exitCode).toBe(0);
    expect(quiet.log).not.toContain("Traceback");
    expect(await Bun.file(job.lora).exists()).toBe(false);
  });

  test("SIGTERM kills a hung run outright and no LoRA is left behind", async () => {
    await using job = await workspace(3);
    const { proc, logPath } = startSimulator(job.dir, launchArgv(job.dir), { LORA_WORKER_SIMULATE_FAIL: "hang@2" });
    await using _running = proc;
    await waitFor(async () => (await Bun.file(logPath).text()).includes("| 1/20 ["), "step 1", WAIT_LIMIT_MS);
    expect(proc.exitCode).toBeNull();
    proc.kill("SIGTERM");
    await proc.exited;
    expect({ exitCode: proc.exitCode, signalCode: proc.signalCode }).toEqual({ exitCode: null, signalCode: "SIGTERM" });
    expect(await Bun.file(job.lora).exists()).toBe(false);
  });

  test("a bad knob is refused with exit 2 before anything runs", async () => {
    await using job = await workspace(3);
    const badKnobs: Array<[string, string]> = [
      ["LORA_WORKER_SIMULATE_SECONDS_PER_STEP", "fast"],
      ["LORA_WORKER_SIMULATE_FAIL", "boom@1"],
    ];
    for (const [knob, value] of badKnobs) {
      const run = await simulate(job.dir, launchArgv(job.dir), { [knob]: value });
      expect(run.exitCode).toBe(2);
      expect(run.log).toStartWith(`lora-worker simulate: ${knob}`);
      expect(run.log).not.toContain("running training");
    }
  });
});

// A run long enough to act on while it trains: 1000 steps of 0.02 s.
function startLongRun(dir: string, knobs: Record<string, string> = {}) {
  const pace = { LORA_WORKER_SIMULATE_SECONDS_PER_STEP: "0.02" };
  return startSimulator(dir, launchArgv(dir, { max_train_steps: "1000" }), { ...pace, ...knobs });
}

async function stepsShown(logPath: string): Promise<number> {
  return lossesByStep(await Bun.file(logPath).text()).length;
}

async function waitForStep(logPath: string, step: number): Promise<void> {
  await waitFor(async () => (await stepsShown(logPath)) >= step, `step ${step}`, WAIT_LIMIT_MS);
}

// SIGKILL to a whole process group when the test ends, however it ends.
function killGroupAtEnd(pgid: number): Disposable {
  return { [Symbol.dispose]: () => void signalGroup(pgid, "SIGKILL") };
}

// Processes whose environment holds `entry`, found as the worker finds strays: by /proc/<pid>/environ.
function processesWithEnv(entry: string): number[] {
  return listPids().filter((pid) => {
    if (pid === process.pid || readProcStat(pid)?.state === "Z") return false;
    try {
      return readFileSync(`/proc/${pid}/environ`, "latin1").split("\0").includes(entry);
    } catch {
      return false;
    }
  });
}

// The trainer killed alone, as an OOM killer would: its group lives on as long as anything in it does.
async function killTrainerOnly(proc: Subprocess): Promise<void> {
  proc.kill("SIGKILL");
  await proc.exited;
}

describe("the simulated trainer misbehaving on request", () => {
  test("with ignore-sigterm, SIGTERM to the group leaves the run training and only SIGKILL stops it", async () => {
    await using job = await workspace(3);
    const { proc, logPath } = startLongRun(job.dir, { LORA_WORKER_SIMULATE_FAIL: "ignore-sigterm" });
    using _group = killGroupAtEnd(proc.pid);
    await waitForStep(logPath, 2);
    expect(signalGroup(proc.pid, "SIGTERM")).toBe(true);
    await waitForStep(logPath, (await stepsShown(logPath)) + 5);
    expect(proc.exitCode).toBeNull();
    signalGroup(proc.pid, "SIGKILL");
    await proc.exited;
    expect({ exitCode: proc.exitCode, signalCode: proc.signalCode }).toEqual({ exitCode: null, signalCode: "SIGKILL" });
  }, MISBEHAVIOUR_TIMEOUT_MS);

  test("without ignore-sigterm, SIGTERM to the group ends the run mid-training", async () => {
    await using job = await workspace(3);
    const { proc, logPath } = startLongRun(job.dir);
    using _group = killGroupAtEnd(proc.pid);
    await waitForStep(logPath, 2);
    signalGroup(proc.pid, "SIGTERM");
    await proc.exited;
    expect({ exitCode: proc.exitCode, signalCode: proc.signalCode }).toEqual({ exitCode: null, signalCode: "SIGTERM" });
    expect(liveGroupMembers(proc.pid)).toEqual([]);
  }, MISBEHAVIOUR_TIMEOUT_MS);

  test("orphan@2 leaves a stray alive in the group of a SIGKILLed trainer; a plain run leaves none", async () => {
    await using orphaning = await workspace(3);
    await using plain = await workspace(3);
    const strayed = startLongRun(orphaning.dir, { LORA_WORKER_SIMULATE_FAIL: "orphan@2" });
    const clean = startLongRun(plain.dir);
    using _strayed = killGroupAtEnd(strayed.proc.pid);
    using _clean = killGroupAtEnd(clean.proc.pid);
    await Promise.all([waitForStep(strayed.logPath, 2), waitForStep(clean.logPath, 2)]);
    await Promise.all([killTrainerOnly(strayed.proc), killTrainerOnly(clean.proc)]);
    expect(liveGroupMembers(strayed.proc.pid).length).toBeGreaterThan(0);
    expect(liveGroupMembers(clean.proc.pid)).toEqual([]);
  }, MISBEHAVIOUR_TIMEOUT_MS);

  test("with ignore-sigterm the stray ignores SIGTERM too, while a plain stray dies of it", async () => {
    await using stubbornJob = await workspace(3);
    await using plainJob = await workspace(3);
    const stubborn = startLongRun(stubbornJob.dir, { LORA_WORKER_SIMULATE_FAIL: "ignore-sigterm,orphan@2" });
    const plain = startLongRun(plainJob.dir, { LORA_WORKER_SIMULATE_FAIL: "orphan@2" });
    using _stubborn = killGroupAtEnd(stubborn.proc.pid);
    using _plain = killGroupAtEnd(plain.proc.pid);
    await Promise.all([waitForStep(stubborn.logPath, 2), waitForStep(plain.logPath, 2)]);
    await Promise.all([killTrainerOnly(stubborn.proc), killTrainerOnly(plain.proc)]);
    signalGroup(stubborn.proc.pid, "SIGTERM");
    signalGroup(plain.proc.pid, "SIGTERM");
    const plainGone = async () => liveGroupMembers(plain.proc.pid).length === 0;
    await waitFor(plainGone, "the plain stray to die of SIGTERM", WAIT_LIMIT_MS);
    expect(liveGroupMembers(stubborn.proc.pid).length).toBeGreaterThan(0);
  }, MISBEHAVIOUR_TIMEOUT_MS);

  test("setsid-orphan@2 leaves a stray outside the trainer's group that still carries the job marker", async () => {
    await using job = await workspace(3);
    const jobId = `simulator-test-${process.pid}-${Date.now()}`;
    const marker = `LORA_WORKER_JOB=${jobId}`;
    const knobs = { LORA_WORKER_SIMULATE_FAIL: "setsid-orphan@2", LORA_WORKER_JOB: jobId };
    const { proc, logPath } = startLongRun(job.dir, knobs);
    using _group = killGroupAtEnd(proc.pid);
    const killStray = (pid: number) => signalGroup(readProcStat(pid)?.pgrp ?? pid, "SIGKILL");
    const killStrays = () => processesWithEnv(marker).forEach(killStray);
    using _strays = { [Symbol.dispose]: killStrays };
    await waitForStep(logPath, 2);
    signalGroup(proc.pid, "SIGKILL");
    await proc.exited;
    const strays = processesWithEnv(marker);
    expect(strays.length).toBeGreaterThan(0);
    expect(strays.map((pid) => readProcStat(pid)?.pgrp === proc.pid)).not.toContain(true);
    expect(liveGroupMembers(proc.pid)).toEqual([]);
  }, MISBEHAVIOUR_TIMEOUT_MS);
});
