import { afterEach, describe, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createGpuProbe } from "../../src/gpu/probe.ts";
import { parseProcessRows } from "../../src/gpu/nvidia-smi.ts";
import { MAX_OUTPUT_BYTES } from "../../src/gpu/nvidia-smi.ts";
import { liveGroupMembers, signalGroup } from "../../src/os/terminate.ts";
import { waitFor } from "../support/wait.ts";
import { endlessNvidiaSmi, RTX_3090_ROW, RTX_3090_UUID, writtenNvidiaSmi } from "../support/written-nvidia-smi.ts";

const tempDirs: string[] = [];
const groups: number[] = [];
afterEach(() => {
  // Nothing a test started may outlive it, even when its assertion that the probe killed it fails.
  for (const pgid of groups.splice(0)) signalGroup(pgid, "SIGKILL");
  for (const dir of tempDirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function scratch(): string {
  const dir = mkdtempSync(join(tmpdir(), "gpu-bounds-"));
  tempDirs.push(dir);
  return dir;
}

// A timeout far beyond the test's own, so a probe that ends at all ended on the cap, not the deadline.
const probeOf = (nvidiaSmi: string) => createGpuProbe({ nvidiaSmi, timeoutMs: 120_000, ttlMs: 0 });
const appsRow = (pid: number, name: string, used: number) => `${RTX_3090_UUID}, ${pid}, ${name}, ${used}`;

describe("nvidia-smi output past the cap", () => {
  test("an nvidia-smi that prints without end fails the probe with the cap, and its whole process group is killed", async () => {
    const dir = scratch();
    const pidFile = join(dir, "pids");
    const result = await probeOf(endlessNvidiaSmi(dir, pidFile)).read();
    expect(result).toMatchObject({
      ok: false,
      error: `nvidia-smi printed more than ${MAX_OUTPUT_BYTES} bytes on stdout; its output was not read further`,
    });
    groups.push(...readFileSync(pidFile, "utf8").trim().split("\n").map(Number));
    expect(groups).toHaveLength(2);
    await waitFor(() => groups.every((pgid) => liveGroupMembers(pgid).length === 0), "both nvidia-smi groups to be gone", 5000);
  });

  test("output just under the cap is read whole and every one of its rows parses (the contrast)", async () => {
    // Every row the same length, so the count below fills 95% of the cap.
    const name = (i: number) => `/opt/job-${String(i).padStart(6, "0")}/python3 train.py`;
    const row = (i: number) => appsRow(100_000 + i, name(i), 1000 + (i % 4000));
    const count = Math.floor((MAX_OUTPUT_BYTES * 0.95) / (row(0).length + 1));
    const apps = `${Array.from({ length: count }, (_, i) => row(i)).join("\n")}\n`;
    expect(apps.length).toBeLessThan(MAX_OUTPUT_BYTES);
    expect(apps.length).toBeGreaterThan(MAX_OUTPUT_BYTES * 0.9);
    const result = await probeOf(writtenNvidiaSmi(scratch(), { "query-gpu.csv": `${RTX_3090_ROW}\n`, "compute-apps.csv": apps })).read();
    if (!result.ok) throw new Error(result.error);
    expect(result.value[0]?.processes).toHaveLength(count);
    const last = count - 1;
    expect(result.value[0]?.processes.at(-1)).toEqual({ pid: 100_000 + last, name: name(last), used_mib: 1000 + (last % 4000) });
  });
});

describe("a process name holding a newline", () => {
  const probeWithApps = (apps: string) => probeOf(writtenNvidiaSmi(scratch(), { "query-gpu.csv": `${RTX_3090_ROW}\n`, "compute-apps.csv": apps })).read();

  test("does not spoil the probe: its row is rejoined, the newline shown as \\n, and the rows around it kept", async () => {
    const apps = [
      appsRow(48213, "python3 /opt/tts/server.py", 3000),
      `${RTX_3090_UUID}, 4242, /tmp/evil`,
      `${RTX_3090_UUID}, 7, forged, 1`,
      `name, with, commas, 1200`,
      appsRow(5151, "./gpu_burn", 15690),
    ].join("\n");
    const result = await probeWithApps(`${apps}\n`);
    if (!result.ok) throw new Error(result.error);
    expect(result.value[0]?.processes).toEqual([
      { pid: 48213, name: "python3 /opt/tts/server.py", used_mib: 3000 },
      { pid: 4242, name: `/tmp/evil\\n${RTX_3090_UUID}, 7, forged, 1\\nname, with, commas`, used_mib: 1200 },
      { pid: 5151, name: "./gpu_burn", used_mib: 15690 },
    ]);
  });

  test("a name whose first line ends like a whole row still takes the lines that do not start one", () => {
    const text = `${RTX_3090_UUID}, 4242, tts, 5\nserver --port 1, 1200\n`;
    expect(parseProcessRows(text)).toEqual({
      ok: true,
      value: [{ gpu_uuid: RTX_3090_UUID, pid: 4242, name: "tts, 5\\nserver --port 1", used_mib: 1200 }],
    });
  });

  test("a line that continues no name is still refused: garbage after a whole row, and a row with a field missing", async () => {
    const whole = appsRow(48213, "python3 /opt/tts/server.py", 3000);
    const [garbage, short] = await Promise.all([
      probeWithApps(`${whole}\nthis is not a row\n`),
      probeWithApps(`${whole}\n${RTX_3090_UUID}, 4242, 1200\n`),
    ]);
    expect([garbage, short]).toMatchObject([
      { ok: false, error: `unparseable nvidia-smi output: ${whole}\\nthis is not a row` },
      { ok: false, error: `unparseable nvidia-smi output: ${RTX_3090_UUID}, 4242, 1200` },
    ]);
  });
});
