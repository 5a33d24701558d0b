import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { closeSync, openSync } from "node:fs";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { verifySafetensors } from "../../src/safetensors/verify.ts";
import { judgeEnding, parseRecordedLog } from "../../src/simulator/replay.ts";
import { within } from "../support/wait.ts";
import { LAUNCH_FLAGS, SCRIPT } from "../support/sim-run.ts";

const ENTRY = join(import.meta.dir, "../support", "simulate-entry.ts");
const FIXTURES = join(import.meta.dir, "../fixtures", "real");
// Fast enough that even the 19 minutes of sdscripts-success-1.log pass in about 10 ms.
const FAST = "100000";
const EXIT_DEADLINE_MS = 10_000;
// Each test waits on Bun processes starting, which a busy machine can slow to seconds.
const TIMEOUT_MS = 30_000;

interface Replayed {
  exitCode: number | null;
  log: string;
  lora: string;
}

interface Scratch extends AsyncDisposable {
  dir: string;
}

async function scratch(): Promise<Scratch> {
  const dir = await mkdtemp(join(tmpdir(), "simulator-replay-"));
  return { dir, [Symbol.asyncDispose]: () => rm(dir, { recursive: true, force: true }) };
}

// The worker's argv, but with a base model and dataset that do not exist: a replay never looks.
function replayArgv(dir: string, extra: string[] = []): string[] {
  const flags = [
    `--pretrained_model_name_or_path=${join(dir, "missing-model.safetensors")}`,
    `--dataset_config=${join(dir, "missing-dataset.toml")}`,
    `--output_dir=${join(dir, "out")}`,
    ...["--output_name=replayed", "--save_model_as=safetensors", "--network_module=networks.lora", "--network_dim=16"],
    ...["--network_alpha=8", "--network_train_unet_only", "--max_train_steps=2000", "--seed=42"],
    "--console_log_simple",
  ];
  return ["launch", ...LAUNCH_FLAGS, SCRIPT, ...flags, ...extra];
}

function replayKnobs(fixture: string, speed: string): Record<string, string> {
  return knobsFor(join(FIXTURES, fixture), speed);
}

function knobsFor(log: string, speed: string): Record<string, string> {
  return { LORA_WORKER_SIMULATE_REPLAY_LOG: log, LORA_WORKER_SIMULATE_REPLAY_SPEED: speed };
}

// stdout and stderr share one file, as in the worker's job log.
function startReplay(dir: string, knobs: Record<string, string>, extra: string[] = []) {
  const logPath = join(dir, "train.log");
  const log = openSync(logPath, "w");
  try {
    const stdio = { stdin: "ignore", stdout: log, stderr: log } as const;
    const proc = Bun.spawn([process.execPath, ENTRY, ...replayArgv(dir, extra)], { ...stdio, env: knobs });
    return { proc, logPath };
  } finally {
    closeSync(log);
  }
}

// stdout and stderr apart, as the trainer's two streams.
async function replayStreams(dir: string, knobs: Record<string, string>) {
  const stdio = { stdin: "ignore", stdout: "pipe", stderr: "pipe" } as const;
  const proc = Bun.spawn([process.execPath, ENTRY, ...replayArgv(dir)], { ...stdio, env: knobs });
  const [stdout, stderr] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text()]);
  await proc.exited;
  return { exitCode: proc.exitCode, stdout, stderr };
}

async function replay(dir: string, knobs: Record<string, string>, extra: string[] = []): Promise<Replayed> {
  const { proc, logPath } = startReplay(dir, knobs, extra);
  await proc.exited;
  const log = await Bun.file(logPath).text();
  return { exitCode: proc.exitCode, log, lora: join(dir, "out", "replayed.safetensors") };
}

// The last `steps:` bar of a recorded log, as tqdm drew it (up to its closing bracket).
async function lastStepsBar(fixture: string): Promise<string | null> {
  const recorded = await Bun.file(join(FIXTURES, fixture)).text();
  const line = recorded.split(/[\r\n]/).findLast((text) => text.startsWith("steps:"));
  return line === undefined ? null : line.slice(0, line.indexOf("]") + 1);
}

// `trainerExit` is the Python process's; accelerate turns any non-zero one into its own exit 1.
const FIXTURE_ENDINGS: ReadonlyArray<{ fixture: string; how: string; trainerExit: number; saves: boolean }> = [
  { fixture: "sdscripts-success-1.log", how: "trained to 2000/2000", trainerExit: 0, saves: true },
  { fixture: "sdscripts-oom-2.log", how: "CUDA out of memory", trainerExit: 1, saves: false },
  { fixture: "sdscripts-nodata-2.log", how: "No data found", trainerExit: 0, saves: false },
  { fixture: "sdscripts-traceback-truncated-2.log", how: "a traceback cut short", trainerExit: 1, saves: false },
  { fixture: "sdscripts-accelerate-1.log", how: "python could not open the script", trainerExit: 2, saves: false },
  { fixture: "sdscripts-rich-1.log", how: "stops before training", trainerExit: 1, saves: false },
  { fixture: "sdscripts-epochs-rich-nan-1.log", how: "stops at step 205/3280", trainerExit: 1, saves: false },
  {
    fixture: "sdscripts-ignored-exception-1.log",
    how: "model saved., then an exception Python ignored at shutdown",
    trainerExit: 0,
    saves: true,
  },
  {
    fixture: "sdscripts-raw-redraws-1.log",
    how: "five raw redraws on one line, stopping at 205/3280",
    trainerExit: 1,
    saves: false,
  },
];

describe("replaying a recorded sd-scripts log", () => {
  const scratches: Scratch[] = [];
  const runs = new Map<string, Promise<Replayed>>();

  // The replays run side by side; each test below reads its own.
  beforeAll(async () => {
    for (const { fixture } of FIXTURE_ENDINGS) {
      const space = await scratch();
      scratches.push(space);
      runs.set(fixture, replay(space.dir, replayKnobs(fixture, FAST)));
    }
  });

  afterAll(async () => {
    await Promise.allSettled(runs.values());
    await Promise.all(scratches.map((space) => space[Symbol.asyncDispose]()));
  });

  for (const { fixture, how, trainerExit, saves } of FIXTURE_ENDINGS) {
    const exitCode = trainerExit === 0 ? 0 : 1;
    const ending = `exit ${exitCode} ${saves ? "and a LoRA" : "and no LoRA"}`;
    test(`${fixture} (${how}) comes through verbatim and ends with ${ending}`, async () => {
      const run = await runs.get(fixture)!;
      const recorded = await Bun.file(join(FIXTURES, fixture)).text();
      expect(run.exitCode).toBe(exitCode);
      expect(run.log.replaceAll("\r", "")).toStartWith(recorded.replaceAll("\r", ""));
      const bar = await lastStepsBar(fixture);
      if (bar !== null) expect(run.log).toContain(`\r${bar}`);
      expect(await Bun.file(run.lora).exists()).toBe(saves);
      if (trainerExit === 0) expect(run.log).not.toContain("returned non-zero exit status");
      else expect(run.log).toEndWith(`' returned non-zero exit status ${trainerExit}.\n`);
    }, TIMEOUT_MS);
  }

  test("a run that trained to its last step says where it saved, and the LoRA verifies as simulated", async () => {
    const run = await runs.get("sdscripts-success-1.log")!;
    expect(run.log).toEndWith(`\nsaving checkpoint: ${run.lora}\nmodel saved.\n`);
    const verdict = await verifySafetensors(run.lora);
    const metadata = { lora_worker_simulated: "true", ss_steps: "2000", ss_output_name: "replayed" };
    expect(verdict).toMatchObject({ ok: true, value: { metadata } });
  }, TIMEOUT_MS);

  test("a bar is one \\r redraw with no newline of its own, and stdout glued after it follows", async () => {
    const run = await runs.get("sdscripts-traceback-truncated-2.log")!;
    expect(run.log).toContain("1500\n\rsteps:   0%|");
    expect(run.log).toContain("| 0/1500 [00:00<?, ?it/s]epoch 1/30\nTraceback");
  }, TIMEOUT_MS);

  test("bars go to stderr and every other line to stdout", async () => {
    await using space = await scratch();
    const { exitCode, stdout, stderr } = await replayStreams(space.dir, replayKnobs("sdscripts-success-1.log", FAST));
    expect(exitCode).toBe(0);
    expect(stdout).not.toContain("steps:");
    expect(stdout).toStartWith("saving checkpoint: /kaggle/working/");
    expect(stderr.split("\n").filter((line) => line !== "").every((line) => line.startsWith("\rsteps: "))).toBe(true);
    expect(stderr.match(/\rsteps: /g)).toHaveLength(21);
  }, TIMEOUT_MS);

  test("an exception Python ignored after model saved. is a success; without its header a crash", async () => {
    const ignored = await runs.get("sdscripts-ignored-exception-1.log")!;
    expect(ignored.exitCode).toBe(0);
    const where = "<function _MultiProcessingDataLoaderIter.__del__ at 0x7f4972feac10>";
    expect(ignored.log).toContain(`\nmodel saved.\nException ignored in: ${where}\n`);
    const metadata = { lora_worker_simulated: "true", ss_steps: "1500" };
    expect(await verifySafetensors(ignored.lora)).toMatchObject({ ok: true, value: { metadata } });

    await using space = await scratch();
    const recorded = await Bun.file(join(FIXTURES, "sdscripts-ignored-exception-1.log")).text();
    const uncaught = join(space.dir, "uncaught.log");
    await writeFile(uncaught, recorded.replace(/^Exception ignored in: .*\n/m, ""));
    const crashed = await replay(space.dir, knobsFor(uncaught, FAST));
    expect(crashed.exitCode).toBe(1);
    expect(crashed.log).toEndWith("' returned non-zero exit status 1.\n");
    expect(await Bun.file(crashed.lora).exists()).toBe(false);
  }, TIMEOUT_MS);

  test("each redraw on a raw log's physical line is its own \\r frame; the terminal's view of it is one", async () => {
    const recorded = await Bun.file(join(FIXTURES, "sdscripts-raw-redraws-1.log")).text();
    await using rawSpace = await scratch();
    await using viewSpace = await scratch();
    const terminalView = join(viewSpace.dir, "terminal-view.log");
    await writeFile(terminalView, recorded.slice(recorded.lastIndexOf("\r") + 1));
    const [raw, viewed] = await Promise.all([
      replayStreams(rawSpace.dir, replayKnobs("sdscripts-raw-redraws-1.log", FAST)),
      replayStreams(viewSpace.dir, knobsFor(terminalView, FAST)),
    ]);
    expect(raw.stderr).toStartWith(recorded);
    expect(raw.stderr.match(/\rsteps: /g)).toHaveLength(5);
    expect(viewed.stderr.match(/\rsteps: /g)).toHaveLength(1);
    expect([raw.exitCode, viewed.exitCode]).toEqual([1, 1]);
  }, TIMEOUT_MS);
});

describe("reading a recorded log", () => {
  test("a raw line reads as one line per redraw, only the last ending it, and a CRLF ending is no redraw", () => {
    const raw =
      "\rsteps:   0%|          | 0/2 [00:00<?, ?it/s]" +
      "\rsteps:  50%|█████     | 1/2 [01:02<01:02, 62.00s/it, avr_loss=0.1]\r\nepoch 2/2\r\n";
    const lines = parseRecordedLog(raw);
    expect(lines.map(({ text, newline, redraw }) => ({ text, newline, redraw }))).toEqual([
      { text: "steps:   0%|          | 0/2 [00:00<?, ?it/s]", newline: false, redraw: true },
      { text: "steps:  50%|█████     | 1/2 [01:02<01:02, 62.00s/it, avr_loss=0.1]", newline: true, redraw: true },
      { text: "epoch 2/2", newline: true, redraw: false },
    ]);
    expect(lines.map((line) => line.bar?.n ?? null)).toEqual([0, 1, null]);
    expect(lines[1]!.bar).toMatchObject({ description: "steps", n: 1, total: 2, elapsedSeconds: 62, after: "" });
  });

  test("tqdm's elapsed time reads as MM:SS and, from an hour on, H:MM:SS", () => {
    const [short, long] = parseRecordedLog(
      "steps:   1%|▏         | 41/3280 [00:50<1:06:54,  1.24s/it]\n" +
        "steps:  50%|█████     | 1640/3280 [1:06:54<1:06:54,  1.24s/it]",
    );
    expect([short!.bar?.elapsedSeconds, long!.bar?.elapsedSeconds, long!.newline]).toEqual([50, 4014, false]);
  });
});

// Python programs that print a traceback after a run's last words; the interpreter's own exit status
// is the truth a replay's ending must match.
const PYTHON = Bun.which("python3");
const AFTER_THE_RUN: ReadonlyArray<{ what: string; program: string }> = [
  {
    what: "an exception in __del__ at interpreter shutdown",
    program:
      "class Loader:\n    def __del__(self):\n        raise AttributeError('python_exit_status')\n" +
      "loader = Loader()\n",
  },
  {
    what: "a chained exception that ends a thread",
    program:
      "import threading\ndef run():\n    try:\n        raise KeyError('first')\n    except KeyError:\n" +
      "        raise RuntimeError('second')\nthread = threading.Thread(target=run)\nthread.start()\nthread.join()\n",
  },
  { what: "an uncaught exception", program: "raise RuntimeError('CUDA error: out of memory')\n" },
];

describe.skipIf(PYTHON === null)("judging a recorded run's end against what Python did", () => {
  for (const { what, program } of AFTER_THE_RUN) {
    test(`${what} after model saved. ends the replay as it ended Python`, async () => {
      const recorded = await Bun.file(join(FIXTURES, "sdscripts-ignored-exception-1.log")).text();
      const lastWords = recorded.slice(0, recorded.indexOf("model saved.\n") + "model saved.\n".length);
      const python = Bun.spawnSync([PYTHON!, "-c", program], { stdout: "pipe", stderr: "pipe" });
      const traceback = python.stderr.toString();
      expect(traceback).toContain("Traceback (most recent call last):");
      const ending = judgeEnding(parseRecordedLog(lastWords + traceback));
      expect(ending).toEqual(python.exitCode === 0 ? { kind: "save" } : { kind: "exit", code: python.exitCode });
    });
  }
});

describe("the pace and the knobs of a replay", () => {
  test("the log's own clock sets the pace: 19 minutes end at once at speed 20000, last seconds at 200", async () => {
    await using fastSpace = await scratch();
    await using slowSpace = await scratch();
    const fast = startReplay(fastSpace.dir, replayKnobs("sdscripts-success-1.log", "20000"));
    const slow = startReplay(slowSpace.dir, replayKnobs("sdscripts-success-1.log", "200"));
    await using _slow = slow.proc;
    expect(await within(fast.proc.exited, EXIT_DEADLINE_MS)).not.toBe("deadline");
    expect(fast.proc.exitCode).toBe(0);
    expect(await within(slow.proc.exited, 1000)).toBe("deadline");
    expect(await Bun.file(slow.logPath).text()).not.toContain("| 2000/2000 [");
  }, TIMEOUT_MS);

  test("argv is still checked: an unknown flag is refused before the log plays", async () => {
    await using space = await scratch();
    const run = await replay(space.dir, replayKnobs("sdscripts-success-1.log", FAST), ["--network_modul=x"]);
    expect(run.exitCode).toBe(1);
    expect(run.log).toContain("\nsdxl_train_network.py: error: unrecognized arguments: --network_modul=x\n");
    expect(run.log).not.toContain("steps:");
  }, TIMEOUT_MS);

  test("a replay knob that cannot work is refused with exit 2 before anything runs", async () => {
    await using space = await scratch();
    const success = join(FIXTURES, "sdscripts-success-1.log");
    const [LOG, SPEED, FAIL] = ["REPLAY_LOG", "REPLAY_SPEED", "FAIL"].map((knob) => `LORA_WORKER_SIMULATE_${knob}`);
    const refusals: Array<[Record<string, string>, string]> = [
      [{ LORA_WORKER_SIMULATE_REPLAY_LOG: "test/fixtures/real/sdscripts-success-1.log" }, `${LOG}=`],
      [{ LORA_WORKER_SIMULATE_REPLAY_LOG: join(space.dir, "missing.log") }, `${LOG}: `],
      [{ LORA_WORKER_SIMULATE_REPLAY_LOG: success, LORA_WORKER_SIMULATE_REPLAY_SPEED: "0" }, `${SPEED}=`],
      [{ ...knobsFor(success, "1"), LORA_WORKER_SIMULATE_FAIL: "ignore-sigterm,oom@3" }, `${FAIL}: oom@3 cannot join`],
    ];
    const runs = await Promise.all(
      refusals.map(async ([knobs]) => {
        await using own = await scratch();
        return await replay(own.dir, knobs);
      }),
    );
    for (const [index, run] of runs.entries()) {
      expect(run.exitCode).toBe(2);
      expect(run.log).toStartWith(`lora-worker simulate: ${refusals[index]![1]}`);
    }
  }, TIMEOUT_MS);
});
