import { describe, expect, test } from "bun:test";
import { chmodSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { safetensorsParts } from "../../src/safetensors/write.ts";
import { makeHostTree, type HostTree } from "../support/host-tree.ts";
import { waitFor } from "../support/wait.ts";
import { dispatchOk, realModeConfig, REAL_LOGS, replayTrainer, supervisorFor } from "../support/real-mode.ts";

// Failure output users posted in public threads (test/fixtures/real/SOURCES.md), played by a trainer that
// prints it and exits as the real run did, under the real supervisor.
async function outcomeOf(tree: HostTree, trainer: string, memoryEvents: string | null = null) {
  await using s = supervisorFor(tree, realModeConfig(tree, trainer), [trainer], { memoryEvents });
  const job = await dispatchOk(s, tree.validRequest());
  await s.supervisor.untilIdle();
  return s.store.get(job.id)!;
}

async function replayed(log: string, exitCode = 1) {
  using tree = makeHostTree();
  return await outcomeOf(tree, replayTrainer(tree, log, exitCode));
}

describe("real failure output is classified by its decisive line, which leads the error", () => {
  const cases: Array<[string, string, string]> = [
    ["sdscripts-cuda-error-oom-1.log", "cuda_oom", "SUBPROCESS: RuntimeError: CUDA error: out of memory"],
    ["sdscripts-cublas-alloc-1.log", "cuda_oom", "RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`"],
    // The markdown backtick is part of that fixture's first line (SOURCES.md says so).
    ["sdscripts-oom-2.log", "cuda_oom", "`torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 14.00 MiB."],
    ["sdscripts-sd15-in-sdxl-1.log", "base_model_invalid", "RuntimeError: Error(s) in loading state_dict for SdxlUNet2DConditionModel:"],
  ];
  for (const [log, code, decisive] of cases) {
    test(`${log} is ${code}`, async () => {
      const row = await replayed(log);
      expect(row).toMatchObject({ status: "failed", error_code: code, exit_code: 1 });
      expect(row.error!.split("\n")[0]).toStartWith(decisive);
    });
  }

  test("real sd-scripts without its tokenizers, offline, is tokenizer_missing, and the error names the fix", async () => {
    const row = await replayed("sdscripts-tokenizer-missing-1.log");
    expect(row).toMatchObject({ status: "failed", error_code: "tokenizer_missing", exit_code: 1 });
    const [lead, what] = row.error!.split("\n");
    expect(lead).toBe("TypeError: expected str, bytes or os.PathLike object, not NoneType");
    expect(what).toStartWith("the trainer could not load a CLIP tokenizer offline: it is not in trainer.tokenizer_dir " +
      "(fix: lora-worker tokenizers write, or tokenizers import PATH, then lora-worker doctor)");
  });

  test("contrast: the same TypeError raised anywhere but in loading a tokenizer is a crash", async () => {
    using tree = makeHostTree();
    const log = join(tree.root, "other-typeerror.log");
    writeFileSync(log, [
      "Traceback (most recent call last):",
      '  File "/opt/sd-scripts/library/train_util.py", line 100, in load_image',
      "    with open(path) as f:",
      "TypeError: expected str, bytes or os.PathLike object, not NoneType",
      "",
    ].join("\n"));
    const trainer = join(tree.root, "other-typeerror.sh");
    writeFileSync(trainer, `#!/bin/sh\ncat '${log}'\nexit 1\n`);
    chmodSync(trainer, 0o755);
    const row = await outcomeOf(tree, trainer);
    expect(row).toMatchObject({ status: "failed", error_code: "trainer_crashed" });
  });

  test("contrast: an illegal memory access is a crash, not an out-of-memory", async () => {
    const row = await replayed("sdscripts-illegal-access-1.log");
    expect(row).toMatchObject({ status: "failed", error_code: "trainer_crashed" });
    expect(row.error).toContain("an illegal memory access was encountered");
  });

  test("the error's tail leaves out accelerate's launcher frames and the argv it quotes", async () => {
    const row = await replayed("sdscripts-accelerate-1.log");
    const raw = await Bun.file(join(REAL_LOGS, "sdscripts-accelerate-1.log")).text();
    // Contrast: the log itself is full of them.
    expect(raw).toContain("simple_launcher");
    expect(row.error).not.toContain("simple_launcher");
    expect(row.error).not.toContain("sys.exit(main())");
    expect(row.error).toContain("can't open file");
  });
});

describe("the kernel's OOM killer, seen through accelerate as a child that died with SIGKILL", () => {
  // A trainer that prints the real accelerate report and, as the kernel would, bumps the cgroup's oom_kill count.
  function killedTrainer(tree: HostTree, events: string, after: number, before = "oom 0"): string {
    const path = join(tree.root, "oom-killed.sh");
    writeFileSync(path, `#!/bin/sh\ncat '${join(REAL_LOGS, "sdscripts-sigkill-1.log")}' >&2\nprintf '${before}\\noom_kill ${after}\\n' > '${events}'\nexit 1\n`);
    chmodSync(path, 0o755);
    return path;
  }

  test("is host_oom_killed with proof when the cgroup's oom_kill counter rose during the run", async () => {
    using tree = makeHostTree();
    const events = join(tree.root, "memory.events");
    writeFileSync(events, "oom 0\noom_kill 2\n");
    const row = await outcomeOf(tree, killedTrainer(tree, events, 3), events);
    expect(row).toMatchObject({ status: "failed", error_code: "host_oom_killed", exit_code: 1 });
    expect(row.error!.split("\n")[0]).toBe("subprocess.CalledProcessError: Command '[…]' died with <Signals.SIGKILL: 9>.");
    expect(row.error).toContain("oom_kill counter of the worker's cgroup rose by 1");
    expect(row.error).not.toContain("/workspace/kohya_ss/lora2");
  });

  test("cgroup v1's memory.oom_control counts the kills in the same words, and is proof the same way", async () => {
    using tree = makeHostTree();
    const control = join(tree.root, "memory.oom_control");
    const v1 = "oom_kill_disable 0\\nunder_oom 0";
    writeFileSync(control, "oom_kill_disable 0\nunder_oom 0\noom_kill 0\n");
    const row = await outcomeOf(tree, killedTrainer(tree, control, 1, v1), control);
    expect(row).toMatchObject({ status: "failed", error_code: "host_oom_killed" });
    expect(row.error).toContain("oom_kill counter of the worker's cgroup rose by 1");
  });

  test("contrast: with a counter that did not rise, it was something else and is a crash", async () => {
    using tree = makeHostTree();
    const events = join(tree.root, "memory.events");
    writeFileSync(events, "oom 0\noom_kill 2\n");
    const row = await outcomeOf(tree, killedTrainer(tree, events, 2), events);
    expect(row).toMatchObject({ status: "failed", error_code: "trainer_crashed" });
    expect(row.error).toContain("not by the OOM killer");
  });

  test("real sd-scripts killed while loading the model, in a cgroup below its need, is host_oom_killed", async () => {
    using tree = makeHostTree();
    const control = join(tree.root, "memory.oom_control");
    writeFileSync(control, "oom_kill_disable 0\nunder_oom 0\noom_kill 0\n");
    const trainer = join(tree.root, "killed.sh");
    const log = join(REAL_LOGS, "sdscripts-cpu-oom-killed-1.log");
    writeFileSync(trainer, `#!/bin/sh\ncat '${log}'\nprintf 'oom_kill_disable 0\\nunder_oom 0\\noom_kill 1\\n' > '${control}'\nexit 1\n`);
    chmodSync(trainer, 0o755);
    const row = await outcomeOf(tree, trainer, control);
    expect(row).toMatchObject({ status: "failed", error_code: "host_oom_killed", exit_code: 1 });
    expect(row.error!.split("\n")[0]).toBe("subprocess.CalledProcessError: Command '[…]' died with <Signals.SIGKILL: 9>.");
    expect(row.error).toContain("oom_kill counter of the worker's cgroup rose by 1");
  });

  test("where the host counts no OOM kills the SIGKILL alone decides, and the error says so", async () => {
    const row = await replayed("sdscripts-sigkill-1.log");
    expect(row).toMatchObject({ status: "failed", error_code: "host_oom_killed" });
    expect(row.error).toContain("evidence: the SIGKILL alone");
  });
});

describe("a nan loss stops the run whatever its bar's total", () => {
  test("bars of another run's total, all nan, stop the run as nan_loss after watchdog.nan_updates steps", async () => {
    using tree = makeHostTree();
    // The real redraws of a 3280-step run at nan, under a fast job (400 steps), then a trainer that would go on.
    const trainer = join(tree.root, "nan-elsewhere.sh");
    writeFileSync(trainer, `#!/bin/sh\ncat '${join(REAL_LOGS, "sdscripts-raw-redraws-1.log")}' >&2\nexec sleep 60\n`);
    chmodSync(trainer, 0o755);
    const config = realModeConfig(tree, trainer, { watchdog: { nan_updates: 3 } });
    await using s = supervisorFor(tree, config, [trainer]);
    const job = await dispatchOk(s, tree.validRequest());
    // Read as an answer about the job reads it, until the run has ended.
    const row = await waitFor(() => {
      const now = s.supervisor.fresh(() => s.store.get(job.id)!);
      return now.status === "failed" ? now : null;
    }, "the run to be stopped");
    expect(row).toMatchObject({ status: "failed", error_code: "nan_loss", stop_reason: "nan_loss", step: 0 });
  });
});

describe("a LoRA is a success only if every weight is finite", () => {
  // A trainer that exits 0 after saving the given LoRA where sd-scripts would.
  function savingTrainer(tree: HostTree, lora: Uint8Array[]): string {
    const file = join(tree.root, "prepared.safetensors");
    writeFileSync(file, Buffer.concat(lora));
    const path = join(tree.root, "saves.sh");
    const script = `#!/bin/bash\nfor a in "$@"; do case "$a" in --output_dir=*) d="\${a#*=}";; --output_name=*) n="\${a#*=}";; esac; done\necho "model saved."\ncp '${file}' "$d/$n.safetensors"\n`;
    writeFileSync(path, script);
    chmodSync(path, 0o755);
    return path;
  }
  const f16 = (name: string, ...halves: number[]) => ({ name, dtype: "F16" as const, shape: [halves.length], data: new Uint8Array(new Uint16Array(halves).buffer) });
  const ONE = 0x3c00;
  const NAN = 0x7e00;

  test("exit 0 with NaN weights is failed/nan_loss, naming the bad tensors", async () => {
    using tree = makeHostTree();
    const lora = safetensorsParts([f16("lora_unet_a.lora_down.weight", ONE, NAN), f16("lora_unet_b.lora_up.weight", ONE, ONE)], {});
    const row = await outcomeOf(tree, savingTrainer(tree, lora));
    expect(row).toMatchObject({ status: "failed", error_code: "nan_loss", exit_code: 0, lora_sha256: null });
    expect(row.error).toContain("1 tensor(s)");
    expect(row.error).toContain("lora_unet_a.lora_down.weight");
  });

  test("contrast: the same LoRA with finite weights succeeds", async () => {
    using tree = makeHostTree();
    const lora = safetensorsParts([f16("lora_unet_a.lora_down.weight", ONE, ONE), f16("lora_unet_b.lora_up.weight", ONE, ONE)], {});
    const row = await outcomeOf(tree, savingTrainer(tree, lora));
    expect(row).toMatchObject({ status: "succeeded", error_code: null, exit_code: 0 });
  });
});

describe("total_steps", () => {
  test("is the tier's from the first answer, before the trainer prints anything", async () => {
    using tree = makeHostTree();
    const trainer = join(tree.root, "silent.sh");
    writeFileSync(trainer, "#!/bin/sh\nsleep 30\n");
    chmodSync(trainer, 0o755);
    await using s = supervisorFor(tree, realModeConfig(tree, trainer), [trainer]);
    const job = await dispatchOk(s, tree.validRequest({ tier: "balanced" }));
    expect(job.total_steps).toBe(1500);
    expect(s.supervisor.fresh((live) => live(job.id))?.total_steps).toBe(1500);
  });
});
