import { describe, expect, setDefaultTimeout, test } from "bun:test";
import { existsSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { SAMPLING_VRAM_MIB } from "../../src/gpu/admission.ts";
import { fakeNvidiaSmi } from "../support/fake-nvidia-smi.ts";
import { makeHostTree } from "../support/host-tree.ts";
import { TRAINERS, realModeConfig, supervisorFor } from "../support/real-mode.ts";

setDefaultTimeout(30_000);

// A supervisor over a fake nvidia-smi scenario, with a trainer that would run if admitted.
function harness(scenario: string, admission: string, gpu: Record<string, unknown> = {}) {
  const tree = makeHostTree();
  const trainer = join(TRAINERS, "exit-zero-without-file.sh");
  const nvidiaSmi = fakeNvidiaSmi(tree.root, scenario);
  const s = supervisorFor(tree, realModeConfig(tree, trainer, { gpu: { nvidia_smi: nvidiaSmi.path, admission, ...gpu } }), [trainer]);
  return {
    tree,
    nvidiaSmi,
    ...s,
    jobDirs: () => (existsSync(join(tree.state, "jobs")) ? readdirSync(join(tree.state, "jobs")) : []),
    async [Symbol.asyncDispose]() {
      await s[Symbol.asyncDispose]();
      tree[Symbol.dispose]();
    },
  };
}

describe("VRAM admission", () => {
  test("preview samples add their VRAM to the tier's: a card that fits the training alone is refused with samples", async () => {
    // Device 0 has 21232 MiB free; training alone needs 20000 here, with samples 20000 + SAMPLING_VRAM_MIB["24gb"].
    const gpu = { vram_need_mib: { fast: { "24gb": 20_000, "48gb": 20_000 } } };
    await using h = harness("two-gpus-tts", "enforce", gpu);
    const result = await h.dispatcher.dispatch(h.tree.validRequest({ tier: "fast", device_index: 0, samples: 2 }));
    expect(result).toMatchObject({
      ok: false,
      error: {
        kind: "refused",
        refusal: {
          reason: "cotenant_active", needed_mib: 20_000 + SAMPLING_VRAM_MIB["24gb"], free_mib: 21232,
          detail: expect.stringContaining(`needs ${20_000 + SAMPLING_VRAM_MIB["24gb"]} MiB (20000 to train and ${SAMPLING_VRAM_MIB["24gb"]} to take preview samples)`),
        },
      },
    });
    expect(h.jobDirs()).toEqual([]);
    // Contrast: without samples the same card admits the run.
    expect((await h.dispatcher.dispatch(h.tree.validRequest({ tier: "fast", device_index: 0 }))).ok).toBe(true);
  });

  test("a train on a card a co-tenant holds is refused as cotenant_active with the numbers, and nothing is spawned", async () => {
    await using h = harness("busy-cards", "enforce");
    const result = await h.dispatcher.dispatch(h.tree.validRequest({ tier: "fast", device_index: 0 }));
    expect(result).toEqual({
      ok: false,
      error: {
        kind: "refused",
        refusal: {
          reason: "cotenant_active",
          detail: 'tier "fast" needs 14000 MiB free on device 0 (RTX 3090) but 9564 MiB are free while python3 /opt/tts/server.py (pid 48213) holds it',
          device_index: 0,
          free_mib: 9564,
          needed_mib: 14000,
          cotenants: [{ device_index: 0, pid: 48213, name: "python3 /opt/tts/server.py", used_mib: 15000 }],
        },
      },
    });
    expect(h.jobDirs()).toEqual([]);
    expect(h.store.activeJobs()).toEqual([]);
  });

  test("a quality train on a card full of something else is refused as insufficient_vram", async () => {
    await using h = harness("busy-cards", "enforce");
    const result = await h.dispatcher.dispatch(h.tree.validRequest({ tier: "quality", device_index: 1 }));
    expect(result).toMatchObject({ ok: false, error: { kind: "refused", refusal: { reason: "insufficient_vram", free_mib: 19136, needed_mib: 36000, cotenants: [] } } });
  });

  test("admission probes nvidia-smi afresh, not from the cache", async () => {
    await using h = harness("busy-cards", "enforce");
    await h.gpu.read();
    const before = h.nvidiaSmi.invocations().length;
    await h.dispatcher.dispatch(h.tree.validRequest({ tier: "fast", device_index: 0 }));
    expect(h.nvidiaSmi.invocations().length).toBe(before + 2);
  });

  test("contrast: on idle cards the same train is admitted and runs", async () => {
    await using h = harness("two-gpus-tts", "enforce");
    const result = await h.dispatcher.dispatch(h.tree.validRequest({ tier: "fast", device_index: 0 }));
    expect(result).toMatchObject({ ok: true, value: { admission_warning: null } });
    await h.supervisor.untilIdle();
  });

  test("under warn the job runs and its record says it was admitted against advice", async () => {
    await using h = harness("busy-cards", "warn");
    const result = await h.dispatcher.dispatch(h.tree.validRequest({ tier: "fast", device_index: 0 }));
    if (!result.ok) throw new Error(JSON.stringify(result));
    expect(result.value.admission_warning).toStartWith('admitted against advice: tier "fast" needs 14000 MiB');
    await h.supervisor.untilIdle();
  });

  test("a failing nvidia-smi refuses under enforce with its own words", async () => {
    await using h = harness("no-driver", "enforce");
    const result = await h.dispatcher.dispatch(h.tree.validRequest());
    expect(result).toMatchObject({ ok: false, error: { kind: "refused", refusal: { reason: "gpu_probe_failed", detail: expect.stringContaining("couldn't communicate with the NVIDIA driver") } } });
  });

  test("under off nvidia-smi is not consulted at all", async () => {
    await using h = harness("no-driver", "off");
    const result = await h.dispatcher.dispatch(h.tree.validRequest());
    expect(result.ok).toBe(true);
    expect(h.nvidiaSmi.invocations()).toEqual([]);
    await h.supervisor.untilIdle();
  });
});
