import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { fakeSystemd } from "../support/fake-systemd.ts";
import { AS_ROOT, makeScratchRoot, managedRoot, runInstall, sourceBinary } from "../support/install-root.ts";
import { treeFingerprint } from "../support/scratch-files.ts";

const TIMEOUT_MS = 90_000;
const NOT_RUNNING = /^install\.sh: systemd is not running here \(\S+ is-system-running answers "offline": a container, a chroot or a box booted without it\); install\.sh needs it to start and health-check lora-worker\.service, and before that would have /;

// A container, a chroot, a box booted without systemd: systemctl is there, but answers "offline" and can do nothing.
describe.skipIf(!AS_ROOT)("install.sh where systemd is not running", () => {
  test("stops before changing anything, saying what it needs and what it would have done; with systemd degraded it installs", async () => {
    using scratch = makeScratchRoot();
    using systemd = fakeSystemd(scratch.root, scratch.tools);
    const host = managedRoot(scratch, systemd);
    const binary = sourceBinary(scratch.tools, "a");
    systemd.setSystemState("offline");
    const before = treeFingerprint(scratch.root);

    const run = await runInstall([...host.args, "--binary", binary]);
    expect(run.code).toBe(1);
    expect(run.stdout).toBe("");
    expect(run.stderr).toMatch(NOT_RUNNING);
    expect(run.stderr).toContain("would have laid out the accounts, the binary, the config, the token, the directories and the unit, run doctor and enabled the unit; nothing changed (run it on a host booted with systemd; --dry-run lists each change)\n");
    expect(run.stderr.split("\n")).toHaveLength(2);
    expect(systemd.calls()).toEqual(["is-system-running"]);
    expect(treeFingerprint(scratch.root)).toEqual(before);

    // Contrast: a running systemd with a failed unit somewhere ("degraded") is a systemd install.sh can use.
    systemd.setSystemState("degraded");
    const degraded = await runInstall([...host.args, "--binary", binary]);
    expect(degraded.stderr).toBe("");
    expect(degraded.code).toBe(0);
    expect(degraded.stdout).toContain(`ok: ${host.healthz} answers`);
    expect(systemd.calls()).toContain("restart lora-worker.service");
  }, TIMEOUT_MS);

  test("a dry run notes it and still lists every change, changing nothing", async () => {
    using scratch = makeScratchRoot();
    using systemd = fakeSystemd(scratch.root, scratch.tools);
    const host = managedRoot(scratch, systemd);
    systemd.setSystemState("offline");
    const before = treeFingerprint(scratch.root);

    const dry = await runInstall([...host.args, "--binary", sourceBinary(scratch.tools, "a"), "--dry-run"]);
    expect(dry.code).toBe(0);
    expect(dry.stdout).toStartWith("note: systemd is not running here (");
    expect(dry.stdout).toContain("a real run stops here and changes nothing; what it would change where systemd runs:\n");
    expect(dry.stdout).toContain("would: install ");
    expect(dry.stdout).toContain("would: enable lora-worker.service\n");
    expect(treeFingerprint(scratch.root)).toEqual(before);
  }, TIMEOUT_MS);

  test("--upgrade stops before swapping the binary, since it could not restart it nor roll it back", async () => {
    using scratch = makeScratchRoot();
    using systemd = fakeSystemd(scratch.root, scratch.tools);
    const host = managedRoot(scratch, systemd);
    const [a, b] = [sourceBinary(scratch.tools, "a"), sourceBinary(scratch.tools, "b")];
    expect((await runInstall([...host.args, "--binary", a])).code).toBe(0);
    systemd.setSystemState("offline");
    const before = treeFingerprint(scratch.root);

    const up = await runInstall([...host.args, "--upgrade", b]);
    expect(up.code).toBe(1);
    expect(up.stderr).toMatch(NOT_RUNNING);
    expect(up.stderr).toContain(`would have swapped ${host.bin} for ${b}, keeping the current one as ${host.bin}.prev to roll back to; nothing changed`);
    expect(treeFingerprint(scratch.root).filter((l) => !l.startsWith("./var/lib/lora-worker"))).toEqual(before.filter((l) => !l.startsWith("./var/lib/lora-worker")));
    expect(readFileSync(host.bin, "utf8")).toBe(readFileSync(a, "utf8"));

    // Contrast: systemd back, the same upgrade goes through.
    systemd.setSystemState("running");
    const again = await runInstall([...host.args, "--upgrade", b]);
    expect(again.code).toBe(0);
    expect(readFileSync(host.bin, "utf8")).toBe(readFileSync(b, "utf8"));
  }, TIMEOUT_MS);
});
