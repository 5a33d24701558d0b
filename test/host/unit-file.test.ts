import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { EXIT_CONFIG, EXIT_STATE } from "../../src/cli/start.ts";
import { makeScratchRoot, runInstall, sourceBinary, type ScratchRoot } from "../support/install-root.ts";

const TIMEOUT_MS = 60_000;
const MAX_EXPOSURE = 2.0;
const UNIT = "lora-worker.service";
// verify builds a start transaction, so the scratch root needs the standard units (sysinit.target, ...).
const HOST_UNITS = ["/usr/lib/systemd/system", "/lib/systemd/system"].find((dir) => existsSync(join(dir, "sysinit.target")));

function analyze(args: string[]): { code: number; output: string } {
  const analyzer = Bun.which("systemd-analyze");
  if (!analyzer) throw new Error("systemd-analyze is missing: apt-get install systemd (.ci/run does)");
  const res = Bun.spawnSync([analyzer, ...args], { stdout: "pipe", stderr: "pipe" });
  return { code: res.exitCode, output: (res.stdout.toString() + res.stderr.toString()).trim() };
}

function exposure(root: string, unit: string): number {
  const { output } = analyze(["security", "--offline=yes", `--root=${root}`, unit]);
  const score = /Overall exposure level for \S+: ([\d.]+)/.exec(output)?.[1];
  if (score === undefined) throw new Error(`no exposure level in: ${output.slice(-500)}`);
  return Number(score);
}

/** The unit's directives as "Key=value" lines, comments and blank lines dropped. */
function directives(text: string): string[] {
  return text.split("\n").map((l) => l.trim()).filter((l) => l !== "" && !l.startsWith("#") && !l.startsWith("["));
}

describe("lora-worker.service as install.sh installs it", () => {
  let scratch: ScratchRoot;
  let root: string;
  const unitDir = () => join(root, "etc/systemd/system");

  beforeAll(async () => {
    scratch = makeScratchRoot();
    root = scratch.root;
    const installed = await runInstall(["--root", root, "--binary", sourceBinary(scratch.tools, "a")]);
    if (installed.code !== 0) throw new Error(`install.sh failed: ${installed.stderr}`);
    if (!HOST_UNITS) throw new Error("no systemd unit directory on this machine: apt-get install systemd");
    Bun.spawnSync(["mkdir", "-p", join(root, "usr/lib/systemd")]);
    Bun.spawnSync(["cp", "-a", HOST_UNITS, join(root, "usr/lib/systemd/system")]);
  }, TIMEOUT_MS);

  afterAll(() => scratch[Symbol.dispose]());

  test("is the repository's unit, with the reference host's user and group", () => {
    expect(readFileSync(join(unitDir(), UNIT), "utf8")).toBe(readFileSync(join(import.meta.dir, "../..", UNIT), "utf8"));
  });

  test("passes systemd-analyze verify with no error and no warning", () => {
    expect(analyze(["verify", `--root=${root}`, UNIT])).toEqual({ code: 0, output: "" });
  });

  test("verify is not a rubber stamp: a missing binary fails it and an unknown directive warns", () => {
    const text = readFileSync(join(unitDir(), UNIT), "utf8");
    writeFileSync(join(unitDir(), "lw-missing-binary.service"), text.replace("/opt/lora-worker/lora-worker", "/opt/lora-worker/absent"));
    const missing = analyze(["verify", `--root=${root}`, "lw-missing-binary.service"]);
    expect(missing.code).not.toBe(0);
    expect(missing.output).toContain("/opt/lora-worker/absent");

    writeFileSync(join(unitDir(), "lw-typo.service"), text.replace("KillMode=process", "KillMode=process\nKilMode=process"));
    expect(analyze(["verify", `--root=${root}`, "lw-typo.service"]).output).toContain("Unknown key 'KilMode'");
  });

  test("systemd-analyze security --offline scores it at most 2.0", () => {
    expect(exposure(root, UNIT)).toBeLessThanOrEqual(MAX_EXPOSURE);
  });

  test("the same service without its hardening block scores far worse", () => {
    const bare = "[Service]\nUser=llmuser\nExecStart=/opt/lora-worker/lora-worker serve\n";
    writeFileSync(join(unitDir(), "lw-bare.service"), bare);
    expect(exposure(root, "lw-bare.service")).toBeGreaterThan(5);
  });

  test("keeps a training alive across restarts and a CUDA child working: the directives issue 5 asks for", () => {
    const lines = directives(readFileSync(join(unitDir(), UNIT), "utf8"));
    for (const wanted of [
      "User=llmuser", "Group=arbotrain", "KillMode=process", "OOMPolicy=continue", "Restart=on-failure", "UMask=0007",
      "StateDirectory=lora-worker", "NoNewPrivileges=yes", "ProtectSystem=strict", "ReadWritePaths=/worktank/arbo/train",
      "PrivateTmp=yes", "ProtectHome=yes", "CapabilityBoundingSet=", "ProtectKernelTunables=yes", "ProtectKernelModules=yes",
      "ProtectClock=yes", "ProtectHostname=yes", "SystemCallFilter=@system-service", "DevicePolicy=closed",
      "DeviceAllow=char-nvidia-frontend rw", "DeviceAllow=char-nvidia rw", "DeviceAllow=char-nvidia-uvm rw",
      "DeviceAllow=/dev/nvidiactl rw", "DeviceAllow=/dev/nvidia-uvm rw",
    ]) {
      expect(lines).toContain(wanted);
    }
    expect(lines.some((l) => l.startsWith("RestrictAddressFamilies="))).toBe(true);
    // Each would break the worker: hides /dev/nvidia*, forbids Bun's JIT, hides /proc/driver/nvidia.
    for (const forbidden of ["PrivateDevices=", "MemoryDenyWriteExecute=", "ProcSubset="]) {
      expect(lines.filter((l) => l.startsWith(forbidden))).toEqual([]);
    }
  });

  test("does not restart a worker that refused to start: the exit codes serve refuses with stop Restart=on-failure", () => {
    const lines = directives(readFileSync(join(unitDir(), UNIT), "utf8"));
    const prevented = lines.filter((l) => l.startsWith("RestartPreventExitStatus=")).flatMap((l) => l.split("=")[1]!.split(/\s+/));
    expect(prevented.map(Number).sort()).toEqual([EXIT_STATE, EXIT_CONFIG].sort());
    // Contrast: the failures a restart can mend (a crash, a signal) are still restarted.
    expect(lines).toContain("Restart=on-failure");
    expect(prevented.filter((code) => Number(code) === 1)).toEqual([]);
  });

  test("offers the shared host's resource controls, none of which can kill a training", () => {
    const lines = directives(readFileSync(join(unitDir(), UNIT), "utf8"));
    expect(lines).toEqual(expect.arrayContaining(["CPUWeight=100", "IOWeight=100", "MemoryHigh=infinity"]));
    // A hard memory bound OOM-kills the training past it; a CPU quota would stall it without a word.
    for (const killing of ["MemoryMax=", "MemoryLimit=", "CPUQuota=", "TasksMax="]) {
      expect(lines.filter((l) => l.startsWith(killing))).toEqual([]);
    }
    // The knobs at an operator's values make a valid unit (contrast: a value systemd cannot read is named).
    const dropIn = join(unitDir(), "lw-shared.service");
    writeFileSync(dropIn, readFileSync(join(unitDir(), UNIT), "utf8").replace("MemoryHigh=infinity", "MemoryHigh=48G\nCPUWeight=50"));
    expect(analyze(["verify", `--root=${root}`, "lw-shared.service"])).toEqual({ code: 0, output: "" });
    writeFileSync(dropIn, readFileSync(join(unitDir(), UNIT), "utf8").replace("MemoryHigh=infinity", "MemoryHigh=lots"));
    expect(analyze(["verify", `--root=${root}`, "lw-shared.service"]).output).toContain("Invalid memory limit 'lots'");
  });
});
