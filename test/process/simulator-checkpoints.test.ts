import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { cp, readdir, rm } from "node:fs/promises";
import { join } from "node:path";
import { verifySafetensors } from "../../src/safetensors/verify.ts";
import { runSimulated, simWorkspace, type SimWorkspace } from "../support/sim-run.ts";

// One image repeated 5 times at batch size 1: 5 batches per epoch, so 12 steps take 3 epochs.
const REPEATS = 5;
const MAX_STEPS = 12;
const EOCD_BYTES = 22;
const STATE_FILES = ["model.safetensors", "optimizer.bin", "random_states_0.pkl", "scheduler.bin", "train_state.json"];
const ZIP_FILES = ["optimizer.bin", "scheduler.bin", "random_states_0.pkl"];

type Workspace = SimWorkspace;
const workspace = () => simWorkspace("simulator-checkpoints-", REPEATS);

async function simulate(dir: string, out: string, extra: string[], knobs: Record<string, string> = {}) {
  const run = { dir, outputDir: join(dir, out), steps: MAX_STEPS, extra, knobs, logPath: join(dir, `${out}.log`) };
  const { exitCode, log } = await runSimulated(run);
  // The log without its tqdm redraws: what print() and the logger wrote, line by line.
  return { exitCode, log, lines: log.replace(/\r[^\r\n]*/g, "") };
}

// Each `steps:` redraw's n/total, in order.
function barCounts(log: string): string[] {
  return [...log.matchAll(/\rsteps: +\d+%\|[^|]*\| (\d+\/\d+) \[/g)].map((match) => match[1]!);
}

// The End Of Central Directory record in a ZIP's last 22 bytes, and where it says the directory ends.
function zipEnd(bytes: Buffer) {
  const end = bytes.subarray(-EOCD_BYTES);
  return {
    signature: end.subarray(0, 4).toString("latin1"),
    directoryEnd: end.readUInt32LE(16) + end.readUInt32LE(12),
    commentLength: end.readUInt16LE(20),
  };
}

async function metadataOf(path: string): Promise<Record<string, string>> {
  const verdict = await verifySafetensors(path);
  if (!verdict.ok) throw new Error(`${path}: ${verdict.error.detail}`);
  return verdict.value.metadata;
}

describe("checkpoints every N steps", () => {
  test("save_every_n_steps with save_state announces each save and leaves what sd-scripts' removal keeps", async () => {
    await using job = await workspace();
    const keep = ["--save_last_n_steps=3", "--save_last_n_steps_state=3"];
    const run = await simulate(job.dir, "out", ["--save_every_n_steps=4", "--save_state", ...keep]);
    expect(run.exitCode).toBe(0);
    const out = join(job.dir, "out");
    const lora = (step: number) => join(out, `mylora-step${String(step).padStart(8, "0")}.safetensors`);
    const state = (step: number) => join(out, `mylora-step${String(step).padStart(8, "0")}-state`);
    // The lines the worker reads: each checkpoint, and the state it then follows until it is whole; accelerate's
    // report of each file it saved, and sd-scripts' of what it removed.
    const stateLines = (dir: string, epoch: number, step: number) => [
      `Saving current state to ${dir}`,
      `save train state to ${join(dir, "train_state.json")} at epoch ${epoch} step ${step}`,
      `Model weights saved in ${join(dir, "model.safetensors")}`,
      `Optimizer state saved in ${join(dir, "optimizer.bin")}`,
      `Scheduler state saved in ${join(dir, "scheduler.bin")}`,
      `Sampler state for dataloader 0 saved in ${join(dir, "sampler.bin")}`,
      `Sampler state for dataloader 1 saved in ${join(dir, "sampler_1.bin")}`,
      `Random states saved in ${join(dir, "random_states_0.pkl")}`,
    ].join("\n") + "\n";
    const saved = (step: number, epoch: number) =>
      `\nsaving checkpoint: ${lora(step)}\n\nsaving state at step ${step}\n${stateLines(state(step), epoch, step)}`;
    const removed = (step: number) => `removing old state: ${state(step)}\nremoving old checkpoint: ${lora(step)}\n`;
    const epochStart = (e: number) => `\nepoch ${e}/3\n\nepoch is incremented. current_epoch: ${e - 1}, epoch: ${e}\n`;
    const expected =
      `${epochStart(1)}${saved(4, 1)}${epochStart(2)}${saved(8, 2)}${removed(4)}${epochStart(3)}${saved(12, 3)}` +
      `${removed(8)}\nsaving last state.\n${stateLines(join(out, "mylora-state"), 3, 12)}` +
      `\nsaving checkpoint: ${join(out, "mylora.safetensors")}\nmodel saved.\n\n`;
    expect(run.lines.slice(run.lines.indexOf("\nepoch 1/3\n"))).toBe(expected);
    // Step N - 3 - 1, rounded down to a multiple of 4, goes: nothing at step 4, step 4 at step 8, step 8 at 12.
    const left = ["mylora-state", "mylora-step00000012-state", "mylora-step00000012.safetensors", "mylora.safetensors"];
    expect((await readdir(out)).sort()).toEqual(left);
    for (const dir of [state(12), join(out, "mylora-state")]) {
      expect((await readdir(dir)).sort()).toEqual(STATE_FILES);
      expect(await Bun.file(join(dir, "train_state.json")).text()).toBe('{"current_epoch": 3, "current_step": 12}');
      const model = await verifySafetensors(join(dir, "model.safetensors"));
      expect(model).toMatchObject({ ok: true, value: { tensorCount: 9, metadata: { format: "pt" } } });
      for (const file of ZIP_FILES) {
        const bytes = Buffer.from(await Bun.file(join(dir, file)).arrayBuffer());
        const end = { signature: "PK\x05\x06", directoryEnd: bytes.length - EOCD_BYTES, commentLength: 0 };
        expect(zipEnd(bytes)).toEqual(end);
      }
    }
    // sd-scripts passes the loop's 0-based epoch for a step checkpoint, the epoch count for the last.
    expect(await metadataOf(lora(12))).toMatchObject({ ss_steps: "12", ss_epoch: "2" });
    expect(await metadataOf(join(out, "mylora.safetensors"))).toMatchObject({ ss_steps: "12", ss_epoch: "3" });
  });

  test("the new flags are read with argparse's types, and accelerate exits 1 around the trainer's 2", async () => {
    await using job = await workspace();
    const run = await simulate(job.dir, "out", ["--save_every_n_steps=four"]);
    expect(run.exitCode).toBe(1);
    expect(run.log).toContain("error: argument --save_every_n_steps: invalid int value: 'four'\n");
    expect(run.log).toContain("returned non-zero exit status 2.\n");
  });
});

describe("--resume", () => {
  let saved: Workspace;
  const stateAt = (step: number) => join(saved.dir, "saved", `mylora-step${String(step).padStart(8, "0")}-state`);

  // States at steps 4 (epoch 1), 8 (epoch 2) and 12 (the end), none removed.
  beforeAll(async () => {
    saved = await workspace();
    const run = await simulate(saved.dir, "saved", ["--save_every_n_steps=4", "--save_state"]);
    if (run.exitCode !== 0) throw new Error(`the run saving states failed:\n${run.log}`);
  });
  afterAll(() => saved[Symbol.asyncDispose]());

  test("within the first epoch, skip_until_initial_step counts the steps left from 0 to max_train_steps", async () => {
    const run = await simulate(saved.dir, "resume-4", [`--resume=${stateAt(4)}`, "--skip_until_initial_step"]);
    expect(run.exitCode).toBe(0);
    expect(run.lines).toContain(`学習ステップ数: ${MAX_STEPS}\nskipping 4 steps / 4ステップをスキップします\n\nepoch 1/3\n`);
    const counts = barCounts(run.log);
    expect([counts[0], counts.at(-1)]).toEqual(["0/8", "8/8"]);
    expect(await metadataOf(join(saved.dir, "resume-4", "mylora.safetensors"))).toMatchObject({ ss_steps: "12" });
  });

  test("past the first epoch, global_step restarts at the step mod an epoch's batches, as in sd-scripts", async () => {
    const args = [`--resume=${stateAt(8)}`, "--skip_until_initial_step", "--save_every_n_steps=4"];
    const run = await simulate(saved.dir, "resume-8", args);
    expect(run.exitCode).toBe(0);
    expect(run.lines).toContain("skipping 8 steps / 8ステップをスキップします\n");
    expect(run.lines).not.toContain("epoch 1/3");
    // Epoch 2 skips 8 - 5 = 3 batches and trains 2, epoch 3 trains 5: global_step runs 3 -> 10 of 12.
    const counts = barCounts(run.log);
    expect([counts[0], counts.at(-1)]).toEqual(["0/9", "7/9"]);
    const out = join(saved.dir, "resume-8");
    expect(await metadataOf(join(out, "mylora.safetensors"))).toMatchObject({ ss_steps: "10" });
    // Its checkpoints carry the restarted count too.
    const files = ["mylora-step00000004.safetensors", "mylora-step00000008.safetensors", "mylora.safetensors"];
    expect((await readdir(out)).filter((name) => name.endsWith(".safetensors")).sort()).toEqual(files);
  });

  test("without skip_until_initial_step the bar counts all of max_train_steps again", async () => {
    const run = await simulate(saved.dir, "resume-4-whole", [`--resume=${stateAt(4)}`]);
    expect(run.exitCode).toBe(0);
    expect(run.lines).not.toContain("skipping");
    const counts = barCounts(run.log);
    expect([counts[0], counts.at(-1)]).toEqual(["0/12", "12/12"]);
    expect(await metadataOf(join(saved.dir, "resume-4-whole", "mylora.safetensors"))).toMatchObject({ ss_steps: "12" });
  });

  test("a failure planned at step 6 strikes at global step 6 of a run resumed from step 4", async () => {
    const knobs = { LORA_WORKER_SIMULATE_FAIL: "oom@6" };
    const run = await simulate(saved.dir, "resume-oom", [`--resume=${stateAt(4)}`, "--skip_until_initial_step"], knobs);
    expect(run.exitCode).toBe(1);
    expect(barCounts(run.log.slice(0, run.log.indexOf("torch.OutOfMemoryError"))).at(-1)).toBe("1/8");
  });

  test("a folder that does not exist is accelerate's ValueError, before training is announced", async () => {
    const missing = join(saved.dir, "no-such-state");
    const run = await simulate(saved.dir, "resume-missing", [`--resume=${missing}`]);
    expect(run.exitCode).toBe(1);
    const exception = `ValueError: Tried to find ${missing} but folder does not exist`;
    expect(run.log).toContain(`Traceback (most recent call last):\n${exception}\n`);
    expect(run.log).toContain("returned non-zero exit status 1.\n");
    expect(run.log).not.toContain("running training");
  });

  test("a state without one of its files fails as torch.load does, or goes on without its random states", async () => {
    const outcomes = [];
    for (const remove of ["optimizer.bin", "model.safetensors", "random_states_0.pkl"]) {
      const dir = join(saved.dir, `without-${remove}`);
      await cp(stateAt(4), dir, { recursive: true });
      await rm(join(dir, remove));
      const args = [`--resume=${dir}`, "--skip_until_initial_step"];
      const run = await simulate(saved.dir, `resume-without-${remove}`, args);
      const notFound = `FileNotFoundError: [Errno 2] No such file or directory: '${dir}/${remove}'\n`;
      outcomes.push({ remove, exitCode: run.exitCode, notFound: run.lines.includes(notFound) });
    }
    expect(outcomes).toEqual([
      { remove: "optimizer.bin", exitCode: 1, notFound: true },
      { remove: "model.safetensors", exitCode: 1, notFound: true },
      { remove: "random_states_0.pkl", exitCode: 0, notFound: false },
    ]);
  });

  test("a state at max_train_steps fails sd-scripts' assertion after the running training block", async () => {
    const run = await simulate(saved.dir, "resume-12", [`--resume=${stateAt(MAX_STEPS)}`, "--skip_until_initial_step"]);
    expect(run.exitCode).toBe(1);
    const assertion =
      "AssertionError: max_train_steps should be greater than initial step / " +
      `max_train_stepsは初期ステップより大きい必要があります: ${MAX_STEPS} vs ${MAX_STEPS}`;
    expect(run.log).toContain(`学習ステップ数: ${MAX_STEPS}\nTraceback (most recent call last):\n${assertion}\n`);
    expect(barCounts(run.log)).toEqual([]);
  });
});
