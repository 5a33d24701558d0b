import { afterEach, describe, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createGpuProbe } from "../../src/gpu/probe.ts";
import { liveGroupMembers } from "../../src/os/terminate.ts";
import { GPU_SCENARIOS, fakeNvidiaSmi, type FakeNvidiaSmi } from "../support/fake-nvidia-smi.ts";
import { waitFor } from "../support/wait.ts";

const SCENARIOS = GPU_SCENARIOS;
const EPOCH = 1_700_000_000_000;
const RTX_3090 = "GPU-5e1c0a3b-7d24-4f89-b6a1-3c9e2f0d8b71";
const A6000 = "GPU-a4f7d2e9-1b38-4c56-9e0f-7d2a8b3c6e15";

const tempDirs: string[] = [];
afterEach(() => {
  for (const dir of tempDirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function scenarioFake(scenario?: string): FakeNvidiaSmi {
  const dir = mkdtempSync(join(tmpdir(), "gpu-probe-"));
  tempDirs.push(dir);
  return fakeNvidiaSmi(dir, scenario);
}

describe("reading devices through a real nvidia-smi process", () => {
  test("two devices come back in bus order with the TTS co-tenant joined to the 3090", async () => {
    const probe = createGpuProbe({ nvidiaSmi: scenarioFake("two-gpus-tts").path, timeoutMs: 5000, ttlMs: 1000, now: () => EPOCH });
    expect(await probe.read()).toEqual({
      ok: true,
      probed_at: EPOCH,
      value: [
        {
          index: 0, name: "NVIDIA GeForce RTX 3090", uuid: RTX_3090,
          memory_total_mib: 24576, memory_used_mib: 3012, memory_free_mib: 21232, utilization_pct: 7,
          processes: [{ pid: 48213, name: "python3 /opt/tts/server.py", used_mib: 3000 }],
        },
        {
          index: 1, name: "NVIDIA RTX A6000", uuid: A6000,
          memory_total_mib: 49140, memory_used_mib: 4, memory_free_mib: 48669, utilization_pct: 0,
          processes: [],
        },
      ],
    });
  });

  test("the fake's default scenario is SPEC's idle 3090 and A6000", async () => {
    const result = await createGpuProbe({ nvidiaSmi: scenarioFake().path, timeoutMs: 5000, ttlMs: 1000 }).read();
    if (!result.ok) throw new Error(result.error);
    expect(result.value.map((d) => [d.index, d.name, d.memory_total_mib, d.processes])).toEqual([
      [0, "NVIDIA GeForce RTX 3090", 24576, []],
      [1, "NVIDIA RTX A6000", 49140, []],
    ]);
  });

  test("a driver/library mismatch is reported with the first line nvidia-smi printed", async () => {
    const probe = createGpuProbe({ nvidiaSmi: scenarioFake("driver-mismatch").path, timeoutMs: 5000, ttlMs: 1000, now: () => EPOCH });
    expect(await probe.read()).toEqual({ ok: false, error: "Failed to initialize NVML: Driver/library version mismatch", probed_at: EPOCH });
  });

  test("a missing driver is reported with nvidia-smi's whole sentence", async () => {
    const result = await createGpuProbe({ nvidiaSmi: scenarioFake("no-driver").path, timeoutMs: 5000, ttlMs: 1000 }).read();
    expect(result).toMatchObject({
      ok: false,
      error:
        "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest NVIDIA driver is installed and running.",
    });
  });

  test("a missing binary is reported by its path", async () => {
    const result = await createGpuProbe({ nvidiaSmi: "/nonexistent/bin/nvidia-smi", timeoutMs: 5000, ttlMs: 1000 }).read();
    expect(result).toMatchObject({ ok: false, error: "nvidia-smi not found at /nonexistent/bin/nvidia-smi" });
  });

  test("output that is not the queried CSV is reported as unparseable with its first line", async () => {
    const result = await createGpuProbe({ nvidiaSmi: scenarioFake("table-output").path, timeoutMs: 5000, ttlMs: 1000 }).read();
    const firstLine = readFileSync(join(SCENARIOS, "table-output/query-gpu.csv"), "utf8").split("\n")[0];
    expect(result).toMatchObject({ ok: false, error: `unparseable nvidia-smi output: ${firstLine}` });
  });

  test("a hung nvidia-smi gives up at the timeout and its whole process group is killed", async () => {
    const fake = scenarioFake("hung-driver");
    const timeoutMs = 1000;
    const started = performance.now();
    const result = await createGpuProbe({ nvidiaSmi: fake.path, timeoutMs, ttlMs: 1000 }).read();
    expect(performance.now() - started).toBeLessThan(timeoutMs + 2000);
    expect(result).toMatchObject({ ok: false, error: `nvidia-smi timed out after ${timeoutMs} ms` });
    const groups = fake.invocations().map((line) => Number(line.split(" ")[0]));
    expect(groups).toHaveLength(2);
    await waitFor(() => groups.every((pgid) => liveGroupMembers(pgid).length === 0), "every nvidia-smi group to be gone", 5000);
  });
});

describe("sharing and caching probe runs", () => {
  test("500 concurrent reads start one probe run: two nvidia-smi processes", async () => {
    const fake = scenarioFake("two-gpus-tts");
    const probe = createGpuProbe({ nvidiaSmi: fake.path, timeoutMs: 5000, ttlMs: 1000 });
    const results = await Promise.all(Array.from({ length: 500 }, () => probe.read()));
    expect(results.every((result) => result === results[0] && result.ok)).toBe(true);
    expect(probe.runs()).toBe(1);
    expect(fake.invocations()).toHaveLength(2);
  });

  test("with no ttl, sequential reads each start a run (the contrast case)", async () => {
    const fake = scenarioFake("two-gpus-tts");
    const probe = createGpuProbe({ nvidiaSmi: fake.path, timeoutMs: 5000, ttlMs: 0 });
    for (let i = 0; i < 3; i++) await probe.read();
    expect(probe.runs()).toBe(3);
    expect(fake.invocations()).toHaveLength(6);
  });

  test("a result is served from cache until ttl has passed since its probe", async () => {
    let clock = EPOCH;
    const fake = scenarioFake("two-gpus-tts");
    const probe = createGpuProbe({ nvidiaSmi: fake.path, timeoutMs: 5000, ttlMs: 1000, now: () => clock });
    const first = await probe.read();
    clock += 999;
    expect(await probe.read()).toBe(first);
    expect(probe.runs()).toBe(1);
    clock += 1;
    expect(await probe.read()).toMatchObject({ ok: true, probed_at: EPOCH + 1000 });
    expect(probe.runs()).toBe(2);
    expect(fake.invocations()).toHaveLength(4);
  });

  test("a failure is cached like a success", async () => {
    const probe = createGpuProbe({ nvidiaSmi: scenarioFake("no-driver").path, timeoutMs: 5000, ttlMs: 60_000 });
    await probe.read();
    expect(await probe.read()).toMatchObject({ ok: false });
    expect(probe.runs()).toBe(1);
  });

  test("a fresh read skips the cache", async () => {
    const probe = createGpuProbe({ nvidiaSmi: scenarioFake("two-gpus-tts").path, timeoutMs: 5000, ttlMs: 60_000 });
    const cached = await probe.read();
    expect(await probe.read({ fresh: true })).not.toBe(cached);
    expect(probe.runs()).toBe(2);
  });

  test("fresh reads during a run share one run started after it, while plain reads join the running one", async () => {
    const fake = scenarioFake("two-gpus-tts");
    const probe = createGpuProbe({ nvidiaSmi: fake.path, timeoutMs: 5000, ttlMs: 60_000 });
    const running = probe.read();
    const joined = probe.read();
    const fresh = Array.from({ length: 20 }, () => probe.read({ fresh: true }));
    const [first, second, ...rest] = await Promise.all([running, joined, ...fresh]);
    expect(second).toBe(first);
    expect(rest.every((result) => result === rest[0] && result !== first && result.ok)).toBe(true);
    expect(probe.runs()).toBe(2);
    expect(fake.invocations()).toHaveLength(4);
  });
});
