import { describe, expect, test } from "bun:test";
import { chmodSync, existsSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { AS_ROOT, makeScratchRoot, runInstall, sourceBinary, STAND_IN } from "../support/install-root.ts";
import { treeFingerprint } from "../support/scratch-files.ts";
import { CONFIG_KEYS } from "../../src/config/keys.ts";
import { ConfigSchema } from "../../src/config/schema.ts";

// A parsed config's keys as the docs name them: a section's keys as "section.key", a top-level key as it is.
const flatten = (toml: Record<string, unknown>) =>
  Object.fromEntries(Object.entries(toml).flatMap(([name, value]) =>
    CONFIG_KEYS.some((k) => k.key === name) ? [[name, value]] : Object.entries(value as object).map(([key, v]) => [`${name}.${key}`, v])));

// install.sh spawns a few dozen short processes; a loaded CI box makes that seconds, not milliseconds.
const TIMEOUT_MS = 60_000;
const standIn = ["--user", STAND_IN.user, "--group", STAND_IN.group];

function owner(path: string): { mode: string; uid: number; gid: number } {
  const st = statSync(path);
  return { mode: (st.mode & 0o7777).toString(8).padStart(4, "0"), uid: st.uid, gid: st.gid };
}

describe("install.sh into a scratch root", () => {
  test("a second run changes nothing, says so, and leaves the tree byte-for-byte and mtime-for-mtime the same", async () => {
    using scratch = makeScratchRoot();
    const binary = sourceBinary(scratch.tools, "a");
    const first = await runInstall(["--root", scratch.root, "--binary", binary, ...standIn]);
    expect(first.code).toBe(0);
    expect(first.stdout).toContain("change: install");
    expect(first.stdout).not.toContain("nothing to change");
    const before = treeFingerprint(scratch.root);

    const second = await runInstall(["--root", scratch.root, "--binary", binary, ...standIn]);
    expect(second.code).toBe(0);
    expect(second.stdout).toContain("nothing to change: the host already matches");
    expect(second.stdout).not.toMatch(/^change:/m);
    expect(treeFingerprint(scratch.root)).toEqual(before);
  }, TIMEOUT_MS);

  test.skipIf(!AS_ROOT)("lays out SPEC §1: binary, unit, config, token 0640 root:group, handoff root 2770 setgid, state dir 0700", async () => {
    using scratch = makeScratchRoot();
    const binary = sourceBinary(scratch.tools, "a");
    const { code } = await runInstall(["--root", scratch.root, "--binary", binary, ...standIn]);
    expect(code).toBe(0);
    const at = (path: string) => join(scratch.root, path);
    const { uid, gid } = STAND_IN;
    expect(owner(at("opt/lora-worker/lora-worker"))).toEqual({ mode: "0755", uid: 0, gid: 0 });
    expect(readFileSync(at("opt/lora-worker/lora-worker"), "utf8")).toBe(readFileSync(binary, "utf8"));
    expect(owner(at("opt/lora-worker/install.sh"))).toEqual({ mode: "0755", uid: 0, gid: 0 });
    expect(owner(at("etc/lora-worker/config.toml"))).toEqual({ mode: "0644", uid: 0, gid: 0 });
    expect(owner(at("etc/lora-worker/token"))).toEqual({ mode: "0640", uid: 0, gid });
    expect(readFileSync(at("etc/lora-worker/token"), "utf8")).toMatch(/^[0-9a-f]{64}\n$/);
    expect(owner(at("worktank/arbo/train"))).toEqual({ mode: "2770", uid: 0, gid });
    expect(owner(at("var/lib/lora-worker"))).toEqual({ mode: "0700", uid, gid });
    // Where `lora-worker tokenizers import` puts the CLIP tokenizers a real run loads offline.
    expect(owner(at("var/lib/lora-worker/tokenizers"))).toEqual({ mode: "0755", uid, gid });
    expect(owner(at("etc/systemd/system/lora-worker.service"))).toEqual({ mode: "0644", uid: 0, gid: 0 });
    const unit = readFileSync(at("etc/systemd/system/lora-worker.service"), "utf8");
    expect(unit).toContain(`\nUser=${STAND_IN.user}\n`);
    expect(unit).toContain(`\nGroup=${STAND_IN.group}\n`);
    // The default config is every key commented out at its default, under its meaning: read as it is, it sets
    // nothing (each default is reported as in use); with every line that has a value uncommented, it sets
    // every key to exactly its default.
    const written = readFileSync(at("etc/lora-worker/config.toml"), "utf8");
    const sections = Bun.TOML.parse(written) as Record<string, unknown>;
    expect(Object.values(sections).every((table) => JSON.stringify(table) === "{}")).toBe(true);
    const uncommented = written.replace(/^# (\w+ = (?!\(unset).*)$/gm, "$1");
    const keys = CONFIG_KEYS.filter((k) => k.toml !== null).map((k) => k.key);
    expect(keys).toContain("retention.keep_days");
    expect(Object.keys(flatten(Bun.TOML.parse(uncommented) as Record<string, unknown>)).sort()).toEqual([...keys].sort());
    expect(ConfigSchema.parse(Bun.TOML.parse(uncommented))).toEqual(ConfigSchema.parse({}));
    for (const key of CONFIG_KEYS) expect(written).toContain(key.key.includes(".") ? `# ${key.key.split(".")[1]} = ` : `# ${key.key} = `);
  }, TIMEOUT_MS);

  test("an operator's config and token survive a re-install; a loosened token mode is put back", async () => {
    using scratch = makeScratchRoot();
    const binary = sourceBinary(scratch.tools, "a");
    expect((await runInstall(["--root", scratch.root, "--binary", binary, ...standIn])).code).toBe(0);
    const config = join(scratch.root, "etc/lora-worker/config.toml");
    const token = join(scratch.root, "etc/lora-worker/token");
    writeFileSync(config, 'listen = "127.0.0.1:9999"\n');
    const tokenText = readFileSync(token, "utf8");
    chmodSync(token, 0o644);

    const again = await runInstall(["--root", scratch.root, "--binary", binary, ...standIn]);
    expect(again.code).toBe(0);
    expect(readFileSync(config, "utf8")).toBe('listen = "127.0.0.1:9999"\n');
    expect(readFileSync(token, "utf8")).toBe(tokenText);
    expect(again.stdout).toContain(`change: chmod 0640 ${token}`);
    expect(owner(token).mode).toBe("0640");
  }, TIMEOUT_MS);

  test("--dry-run lists every change it would make and creates nothing", async () => {
    using scratch = makeScratchRoot();
    const binary = sourceBinary(scratch.tools, "a");
    const dry = await runInstall(["--root", scratch.root, "--binary", binary, "--dry-run", ...standIn]);
    expect(dry.code).toBe(0);
    expect(readdirSync(scratch.root)).toEqual([]);
    for (const what of ["opt/lora-worker/lora-worker", "etc/systemd/system/lora-worker.service", "etc/lora-worker/config.toml", "etc/lora-worker/token", "worktank/arbo/train", "var/lib/lora-worker", "var/lib/lora-worker/tokenizers"]) {
      expect(dry.stdout).toContain(join(scratch.root, what));
    }
    expect(dry.stdout).not.toMatch(/^change:/m);
    expect(dry.stdout).toMatch(/\d+ changes would be made \(dry run: nothing changed\)/);

    // Contrast: on an installed root the same dry run has nothing to list.
    expect((await runInstall(["--root", scratch.root, "--binary", binary, ...standIn])).code).toBe(0);
    const before = treeFingerprint(scratch.root);
    const dryAgain = await runInstall(["--root", scratch.root, "--binary", binary, "--dry-run", ...standIn]);
    expect(dryAgain.stdout).not.toContain("would:");
    expect(dryAgain.stdout).toContain("nothing to change");
    expect(treeFingerprint(scratch.root)).toEqual(before);
  }, TIMEOUT_MS);

  test("with accounts this machine lacks, --root sets the modes, keeps root as owner and names what it did not chown", async () => {
    const missing = ["lw-test-no-such-user", "lw-test-no-such-group"] as const;
    using scratch = makeScratchRoot();
    const binary = sourceBinary(scratch.tools, "a");
    const run = await runInstall(["--root", scratch.root, "--binary", binary, "--user", missing[0], "--group", missing[1]]);
    expect(run.code).toBe(0);
    const token = join(scratch.root, "etc/lora-worker/token");
    expect(owner(token)).toEqual({ mode: "0640", uid: process.geteuid!(), gid: process.getegid!() });
    expect(owner(join(scratch.root, "worktank/arbo/train")).mode).toBe("2770");
    expect(run.stdout).toContain(`note: --root: the group ${missing[1]}, the user ${missing[0]}`);
    expect(run.stdout).toContain(`${token} (root:${missing[1]})`);
    expect(run.stdout).toContain(`${join(scratch.root, "var/lib/lora-worker")} (${missing[0]}:${missing[1]})`);
    expect(existsSync(join(scratch.root, "etc/systemd/system/lora-worker.service"))).toBe(true);
  }, TIMEOUT_MS);
});
