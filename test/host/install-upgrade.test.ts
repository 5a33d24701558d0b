import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { fakeSystemd } from "../support/fake-systemd.ts";
import { AS_ROOT, brokenBinary, makeScratchRoot, managedRoot, runInstall, sourceBinary } from "../support/install-root.ts";

const TIMEOUT_MS = 90_000;

async function healthzStatus(url: string): Promise<number> {
  return (await fetch(url)).status;
}

describe.skipIf(!AS_ROOT)("install.sh with a service manager", () => {
  test("runs doctor, enables and starts the unit, waits for /healthz; a second run restarts nothing", async () => {
    using scratch = makeScratchRoot();
    using systemd = fakeSystemd(scratch.root, scratch.tools);
    const host = managedRoot(scratch, systemd);
    const binary = sourceBinary(scratch.tools, "a");

    const first = await runInstall([...host.args, "--binary", binary]);
    expect(first.stderr).toBe("");
    expect(first.code).toBe(0);
    expect(first.stdout).toContain("doctor:\n");
    expect(first.stdout).toMatch(/^ {2}OK {3}handoff root: /m);
    expect(first.stdout).toContain(`ok: ${host.healthz} answers`);
    expect(systemd.calls()).toContain("enable lora-worker.service");
    expect(systemd.calls()).toContain("restart lora-worker.service");
    expect(await healthzStatus(host.healthz)).toBe(200);
    const pid = systemd.mainPid();

    const second = await runInstall([...host.args, "--binary", binary]);
    expect(second.code).toBe(0);
    expect(second.stdout).toContain("nothing to change");
    expect(systemd.calls().filter((c) => c.startsWith("restart"))).toHaveLength(1);
    expect(systemd.mainPid()).toBe(pid);
  }, TIMEOUT_MS);

  test("a doctor FAIL stops the install before the unit is enabled or started", async () => {
    using scratch = makeScratchRoot();
    using systemd = fakeSystemd(scratch.root, scratch.tools);
    const host = managedRoot(scratch, systemd, false);

    const run = await runInstall([...host.args, "--binary", sourceBinary(scratch.tools, "a")]);
    expect(run.code).toBe(1);
    expect(run.stdout).toContain(`FAIL model root ${join(scratch.root, "srv/models")}: `);
    expect(run.stderr).toContain("doctor found problems");
    expect(systemd.calls().filter((c) => /^(enable|restart)/.test(c))).toEqual([]);
    expect(systemd.mainPid()).toBeNull();
  }, TIMEOUT_MS);

  test("--upgrade swaps the binary, keeps the old one as .prev and restarts; an upgrade to .prev trades them back", async () => {
    using scratch = makeScratchRoot();
    using systemd = fakeSystemd(scratch.root, scratch.tools);
    const host = managedRoot(scratch, systemd);
    const [a, b] = [sourceBinary(scratch.tools, "a"), sourceBinary(scratch.tools, "b")];
    const content = (path: string) => readFileSync(path, "utf8");
    expect((await runInstall([...host.args, "--binary", a])).code).toBe(0);
    const before = systemd.mainPid();

    const up = await runInstall([...host.args, "--upgrade", b]);
    expect(up.stderr).toBe("");
    expect(up.code).toBe(0);
    expect([content(host.bin), content(`${host.bin}.prev`)]).toEqual([content(b), content(a)]);
    expect(systemd.mainPid()).not.toBe(before);
    expect(await healthzStatus(host.healthz)).toBe(200);

    // The same binary again is not an upgrade.
    const again = await runInstall([...host.args, "--upgrade", b]);
    expect(again.code).toBe(0);
    expect(again.stdout).toContain("nothing to change");

    // A rollback by hand: the two binaries trade places.
    const back = await runInstall([...host.args, "--upgrade", `${host.bin}.prev`]);
    expect(back.code).toBe(0);
    expect([content(host.bin), content(`${host.bin}.prev`)]).toEqual([content(a), content(b)]);
    expect(await healthzStatus(host.healthz)).toBe(200);
  }, TIMEOUT_MS);

  test("--upgrade to a build that fails its health gate puts .prev back, running, and prints the journal", async () => {
    using scratch = makeScratchRoot();
    using systemd = fakeSystemd(scratch.root, scratch.tools);
    const host = managedRoot(scratch, systemd);
    const good = sourceBinary(scratch.tools, "a");
    expect((await runInstall([...host.args, "--binary", good])).code).toBe(0);

    const up = await runInstall([...host.args, "--upgrade", brokenBinary(scratch.tools), "--health-timeout", "6"]);
    expect(up.code).toBe(1);
    expect(up.stderr).toContain(`FAILED: ${host.healthz} did not answer within 6 s`);
    expect(up.stderr).toContain("broken build: serve cannot start");
    expect(up.stderr).toContain("rolled back: the previous binary is running again");
    expect(readFileSync(host.bin, "utf8")).toBe(readFileSync(good, "utf8"));
    expect(systemd.mainPid()).not.toBeNull();
    expect(await healthzStatus(host.healthz)).toBe(200);
  }, TIMEOUT_MS);
});
