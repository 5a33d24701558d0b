import { describe, expect, test } from "bun:test";
import { chmodSync, existsSync, mkdirSync, readdirSync, readFileSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { AS_ROOT, makeScratchRoot, runInstall, sourceBinary, STAND_IN } from "../support/install-root.ts";
import { CHECKPOINT_KEYS, writeCheckpoint } from "../support/checkpoints.ts";
import { fakeNvidiaSmi } from "../support/fake-nvidia-smi.ts";
import { writeFakePython } from "../support/fake-python.ts";
import { writeStandInSdScripts } from "../support/stand-in-sd-scripts.ts";
import { fakeSystemd } from "../support/fake-systemd.ts";
import { freePort, makeDeviceNode, treeFingerprint, writeExecutable } from "../support/scratch-files.ts";
import { writeTokenizers } from "../support/tokenizers.ts";
import { CONFIG_KEYS } from "../../src/config/keys.ts";
import { ConfigSchema } from "../../src/config/schema.ts";
import { FACE_PYTHON, SCORER_TEST_MS, SECONDS_PER_IMAGE } from "../support/face-scorer.ts";

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
    // model_roots' default, empty: the base checkpoint is the operator's to place there.
    expect(owner(at("worktank/models"))).toEqual({ mode: "0755", uid: 0, gid: 0 });
    expect(readdirSync(at("worktank/models"))).toEqual([]);
    // Where `lora-worker tokenizers import` puts the CLIP tokenizers a real run loads offline.
    expect(owner(at("var/lib/lora-worker/tokenizers"))).toEqual({ mode: "0755", uid, gid });
    expect(owner(at("etc/systemd/system/lora-worker.service"))).toEqual({ mode: "0644", uid: 0, gid: 0 });
    const unit = readFileSync(at("etc/systemd/system/lora-worker.service"), "utf8");
    expect(unit).toContain(`\nUser=${STAND_IN.user}\n`);
    expect(unit).toContain(`\nGroup=${STAND_IN.group}\n`);
    // The default config is every key commented out at its default, under its meaning, but for the paths
    // install.sh lays out, which --root sets to their places in the scratch tree: read as it is, it sets only
    // those; with every line that has a value uncommented, it sets every other key to exactly its default.
    const written = readFileSync(at("etc/lora-worker/config.toml"), "utf8");
    const rooted = {
      state_dir: at("var/lib/lora-worker"),
      handoff_root: at("worktank/arbo/train"),
      model_roots: [at("worktank/models")],
      "auth.token_file": at("etc/lora-worker/token"),
      // Not the host's /etc/lora-worker/read-token: on a host with a worker installed, its doctor judged that one.
      "auth.read_token_file": at("etc/lora-worker/read-token"),
    };
    expect(flatten(Bun.TOML.parse(written) as Record<string, unknown>)).toEqual(rooted);
    const uncommented = written.replace(/^# (\w+ = (?!\(unset).*)$/gm, "$1");
    const keys = CONFIG_KEYS.filter((k) => k.toml !== null).map((k) => k.key);
    expect(keys).toContain("retention.keep_days");
    expect(Object.keys(flatten(Bun.TOML.parse(uncommented) as Record<string, unknown>)).sort()).toEqual([...keys].sort());
    const { "auth.token_file": tokenFile, "auth.read_token_file": readTokenFile, ...topLevel } = rooted;
    expect(ConfigSchema.parse(Bun.TOML.parse(uncommented)))
      .toEqual(ConfigSchema.parse({ ...topLevel, auth: { token_file: tokenFile, read_token_file: readTokenFile } }));
    for (const key of CONFIG_KEYS) {
      const name = key.key.includes(".") ? key.key.split(".")[1]! : key.key;
      expect(written).toMatch(new RegExp(`^${key.key in rooted ? "" : "# "}${name} = `, "m"));
    }
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

  test("an existing model root is the operator's: its owner, mode and files are left as they are", async () => {
    using scratch = makeScratchRoot();
    const models = join(scratch.root, "worktank/models");
    mkdirSync(models, { recursive: true });
    writeFileSync(join(models, "theirs.safetensors"), "");
    chmodSync(models, 0o750);
    const run = await runInstall(["--root", scratch.root, "--binary", sourceBinary(scratch.tools, "a"), ...standIn]);
    expect(run.code).toBe(0);
    expect(run.stdout).not.toContain(models);
    expect(owner(models).mode).toBe("0750");
    expect(readdirSync(models)).toEqual(["theirs.safetensors"]);

    // Contrast: a root without one gets it made, and says so.
    using fresh = makeScratchRoot();
    const made = await runInstall(["--root", fresh.root, "--binary", sourceBinary(fresh.tools, "a"), ...standIn]);
    expect(made.stdout).toContain(`change: create directory ${join(fresh.root, "worktank/models")} (mode 0755: place the SDXL base checkpoint here)`);
  }, TIMEOUT_MS);

  test("a host that lacks a command install.sh runs is told which, and the package that brings it, before anything changes", async () => {
    using scratch = makeScratchRoot();
    const binary = sourceBinary(scratch.tools, "a");
    // A PATH of exactly what the script's header says a --root install needs, but cmp.
    const needed = ["bash", "basename", "dirname", "install", "mkdir", "mktemp", "mv", "rm", "stat", "chmod", "chown", "cmp", "cut", "grep", "head", "id", "od", "sed", "sleep", "timeout", "tr", "getent"];
    const bin = join(scratch.tools, "bin");
    mkdirSync(bin);
    const link = (name: string) => symlinkSync(Bun.which(name)!, join(bin, name));
    for (const name of needed.filter((n) => n !== "cmp")) link(name);
    const lacking = await runInstall(["--root", scratch.root, "--binary", binary, ...standIn], { PATH: bin });
    expect(lacking.code).toBe(1);
    expect(lacking.stderr).toStartWith("install.sh: this host lacks cmp: install.sh needs coreutils, sed, grep, diffutils (cmp), libc-bin (getent)");
    expect(lacking.stderr).toContain("; nothing changed");
    expect(readdirSync(scratch.root)).toEqual([]);

    // Contrast: with cmp too, that PATH is all a scratch install needs (no curl among it).
    link("cmp");
    const whole = await runInstall(["--root", scratch.root, "--binary", binary, ...standIn], { PATH: bin });
    expect(whole.stderr).toBe("");
    expect(whole.code).toBe(0);
  }, TIMEOUT_MS);

  test("--dry-run lists every change it would make and creates nothing", async () => {
    using scratch = makeScratchRoot();
    const binary = sourceBinary(scratch.tools, "a");
    const dry = await runInstall(["--root", scratch.root, "--binary", binary, "--dry-run", ...standIn]);
    expect(dry.code).toBe(0);
    expect(readdirSync(scratch.root)).toEqual([]);
    for (const what of ["opt/lora-worker/lora-worker", "etc/systemd/system/lora-worker.service", "etc/lora-worker/config.toml", "etc/lora-worker/token", "worktank/arbo/train", "var/lib/lora-worker", "var/lib/lora-worker/tokenizers", "worktank/models"]) {
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

// The operator's part of a host: what a fresh install cannot make and doctor must name, with the command that brings it.
describe.skipIf(!AS_ROOT)("a fresh install's doctor", () => {
  const failures = (stdout: string) => stdout.split("\n").filter((l) => l.startsWith("  FAIL ")).map((l) => l.slice(2));
  const nameOf = (line: string) => /^FAIL ([^:]+?)(?: \/\S+)?:/.exec(line)?.[1];

  test("FAILs only on the trainer's environment, the tokenizers and a base model, each with the command that brings it; brought, the install goes through", async () => {
    using scratch = makeScratchRoot();
    using systemd = fakeSystemd(scratch.root, scratch.tools);
    const { root, tools } = scratch;
    // A GPU host's driver, which a fresh install does not bring either: nvidia-smi on the PATH and /dev/nvidia-uvm.
    const driver = join(tools, "driver");
    mkdirSync(driver);
    fakeNvidiaSmi(driver);
    makeDeviceNode(join(root, "dev/nvidia-uvm"));
    const env = { PATH: `${driver}:${process.env.PATH}` };
    const args = ["--root", root, "--systemctl", systemd.systemctl, "--journalctl", systemd.journalctl, ...standIn, "--binary", sourceBinary(tools, "a")];

    const fresh = await runInstall(args, { ...env, LORA_WORKER_LISTEN: `127.0.0.1:${freePort()}` });
    expect(fresh.code).toBe(1);
    expect(fresh.stderr).toContain("doctor found problems");
    const fails = failures(fresh.stdout);
    expect(fails.map(nameOf)).toEqual(["config", "accelerate", "torch", "sd-scripts", "tokenizers", "base model"]);
    // The checks that ask the venv's Python do not count the missing venv twice.
    expect(fresh.stdout).toMatch(/^ {2}WARN sd-scripts argv: not checked: there is no .* beside trainer.accelerate/m);
    const trainerInstall = "fix: lora-worker trainer install FILE (a bundle made by lora-worker trainer bundle on a machine with PyPI), then set trainer.accelerate and trainer.sd_scripts_dir to the two lines it prints";
    for (const line of fails.slice(0, 4)) expect(line).toContain(trainerInstall);
    expect(fails[4]).toContain("fix: lora-worker tokenizers write (both, from the CLIP merges the binary carries)");
    const models = join(root, "worktank/models");
    expect(fails[5]).toContain(`no .safetensors in ${models}: no job has a base model to name — fix: copy the SDXL base checkpoint (sd_xl_base_1.0.safetensors) into ${models}, readable by ${STAND_IN.user}`);
    expect(fresh.stdout).toMatch(/^ {2}OK {3}model root /m);
    expect(systemd.calls().filter((c) => /^(enable|restart)/.test(c))).toEqual([]);

    // Contrast: the same host once the operator brought the three, and named them in the config.
    const venv = join(tools, "venv/bin");
    mkdirSync(venv, { recursive: true });
    const accelerate = writeExecutable(join(venv, "accelerate"), "#!/bin/sh\necho 'usage: accelerate <command> [<args>]'\n");
    writeFakePython(join(venv, "python"));
    const sdScripts = writeStandInSdScripts(join(tools, "sd-scripts"));
    writeTokenizers(join(root, "var/lib/lora-worker/tokenizers"));
    const model = writeCheckpoint(join(models, "sd_xl_base_1.0.safetensors"), CHECKPOINT_KEYS.sdxl);
    const config = join(root, "etc/lora-worker/config.toml");
    const port = freePort();
    writeFileSync(config, readFileSync(config, "utf8")
      .replace(/^# listen = .*$/m, `listen = "127.0.0.1:${port}"`)
      .replace(/^# accelerate = .*$/m, `accelerate = "${accelerate}"`)
      .replace(/^# sd_scripts_dir = .*$/m, `sd_scripts_dir = "${sdScripts}"`)
      .replace(/^# base_model = .*$/m, `base_model = "${model}"`)
      // The stand-in venv has no dlib: the face scorer's Python is the tests' venv.
      .replace(/^# python = .*$/m, `python = "${FACE_PYTHON}"`)
      .replace(/^# seconds_per_image = .*$/m, `seconds_per_image = ${SECONDS_PER_IMAGE}`));

    const brought = await runInstall(args, env);
    expect(failures(brought.stdout)).toEqual([]);
    expect(brought.stdout).toMatch(/^ {2}OK {3}base model: smoke.base_model \S+ is an SDXL checkpoint readable by /m);
    expect(brought.stdout).toContain(`ok: http://127.0.0.1:${port}/healthz answers`);
    expect(brought.code).toBe(0);
  }, SCORER_TEST_MS);
});
