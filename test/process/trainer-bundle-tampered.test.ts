import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import {
  appendFileSync, cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync,
  truncateSync, writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { bundle } from "../../src/trainer/bundle.ts";
import { install } from "../../src/trainer/install.ts";
import { parseLock } from "../../src/trainer/lock.ts";
import { writeStandInSdScripts } from "../support/stand-in-sd-scripts.ts";
import { writeWheel } from "../support/wheels.ts";

// pip builds a venv and installs two wheels: seconds, more on a loaded machine.
setDefaultTimeout(120_000);

const LOCK = "fakeaccel==1.0\ntinydep==2.0\n";
let root: string;
let good: string;
let marker: string;

// One good bundle, made once; each case unpacks it, changes one thing and packs it again with the real tar.
beforeAll(async () => {
  root = mkdtempSync(join(tmpdir(), "lora-worker-bundle-tampered-"));
  const index = join(root, "index");
  mkdirSync(index);
  writeWheel(index, { name: "fakeaccel", version: "1.0", script: "accelerate", says: "usage: accelerate", requires: ["tinydep"] });
  writeWheel(index, { name: "tinydep", version: "2.0" });
  writeStandInSdScripts(join(root, "sd-scripts"));
  mkdirSync(join(root, "home"));
  good = join(root, "good.tar");
  marker = join(root, "the-pth-ran");
  const env = { PATH: process.env.PATH, HOME: join(root, "home"), PIP_CONFIG_FILE: "/dev/null", PIP_NO_INDEX: "1", PIP_FIND_LINKS: index };
  const made = await bundle({
    sdScripts: join(root, "sd-scripts"), out: good, python: "python3", otherSdScripts: true,
    lock: { pins: parseLock(LOCK), text: LOCK }, env, say: () => {},
  });
  if (!made.ok) throw new Error(made.error);
});

afterAll(() => rmSync(root, { recursive: true, force: true }));

let cases = 0;
// The good bundle unpacked into a fresh folder, changed by `change`, and packed with `tar` from `members`.
function tampered(change: (dir: string) => void, members = ["manifest.json", "python-lock.txt", "wheels", "sd-scripts"]) {
  const dir = join(root, `case-${++cases}`);
  mkdirSync(dir);
  Bun.spawnSync(["tar", "-xf", good, "-C", dir]);
  change(dir);
  const out = `${dir}.tar`;
  const tar = Bun.spawnSync(["tar", "-cPf", out, "-C", dir, ...members]);
  if (tar.exitCode !== 0) throw new Error(tar.stderr.toString());
  return out;
}

async function installInto(archive: string) {
  const parent = join(root, `opt-${++cases}`);
  const result = await install({ archive, venv: join(parent, "env"), python: "python3", say: () => {} });
  return { result, parent, left: existsSync(parent) ? readdirSync(parent) : [] };
}

async function refused(archive: string, expected: string) {
  const { result, left } = await installInto(archive);
  expect(result).toEqual({ ok: false, error: expect.stringContaining(expected) });
  expect(left).toEqual([]);
  expect(existsSync(marker)).toBe(false);
}

describe("trainer install installs what its manifest says, or nothing", () => {
  test("contrast: the untampered bundle installs", async () => {
    const { result, left } = await installInto(good);
    expect(result).toMatchObject({ ok: true });
    expect(left).toEqual(["env"]);
  });

  test("a wheel swapped for another of the same name (a .pth inside) is refused by its sha256 before pip or Python runs", async () => {
    const archive = tampered((dir) => {
      rmSync(join(dir, "wheels", "tinydep-2.0-py3-none-any.whl"));
      writeWheel(join(dir, "wheels"), { name: "tinydep", version: "2.0", pth: `import os; open(${JSON.stringify(marker)}, "w")` });
    });
    await refused(archive, "its wheel tinydep-2.0-py3-none-any.whl is not the one its manifest names (sha256 ");
  });

  test("a wheel the manifest does not name is refused", async () => {
    await refused(tampered((dir) => writeWheel(join(dir, "wheels"), { name: "extra", version: "1.0" })), "its wheel extra-1.0-py3-none-any.whl is not one its manifest names");
  });

  test("a requirements.txt of the archive's own (a --find-links line) is refused: pip reads requirements written from the manifest", async () => {
    const archive = tampered((dir) => writeFileSync(join(dir, "requirements.txt"), `--find-links ${root}\ntinydep==2.0\n`),
      ["manifest.json", "python-lock.txt", "wheels", "sd-scripts", "requirements.txt"]);
    await refused(archive, `its member "requirements.txt" is not one of a bundle's parts`);
  });

  test("a tree changed after bundling, and one cut short of sdxl_train_network.py, are refused by the manifest's digest", async () => {
    await refused(tampered((dir) => appendFileSync(join(dir, "sd-scripts", "train_network.py"), "\nimport os\n")), "its sd-scripts tree is not the one its manifest names");
    await refused(tampered((dir) => rmSync(join(dir, "sd-scripts", "sdxl_train_network.py"))), "its sd-scripts tree is not the one its manifest names");
  });

  test("a manifest calling another tree 48d368f is refused", async () => {
    const archive = tampered((dir) => {
      const manifest = JSON.parse(readFileSync(join(dir, "manifest.json"), "utf8"));
      writeFileSync(join(dir, "manifest.json"), JSON.stringify({ ...manifest, sd_scripts_commit: "48d368fa557731ad0488c07304dfeba8c07910eb" }));
    });
    await refused(archive, "its manifest calls its sd-scripts tree 48d368f, and the tree is not that commit's");
  });

  test("an archive cut in the middle of a member is refused as cut short", async () => {
    const cut = join(root, "cut.tar");
    cpSync(good, cut);
    // Ten bytes into the data of sd-scripts' sdxl_train_network.py, whose header holds its name.
    const header = readFileSync(good).indexOf("sd-scripts/sdxl_train_network.py");
    truncateSync(cut, header + 512 + 10);
    await refused(cut, "cut short");
  });

  test("a symlink, a member leaving its folder, a .pyc in sd-scripts are refused before anything is unpacked", async () => {
    const outside = join(root, "outside");
    mkdirSync(outside);
    const linked = tampered((dir) => {
      rmSync(join(dir, "sd-scripts"), { recursive: true });
      symlinkSync(outside, join(dir, "sd-scripts"));
    });
    await refused(linked, `its member "sd-scripts" is a symbolic link; a bundle holds only regular files and folders`);
    const escaping = tampered((dir) => writeFileSync(join(dir, "..", "escape.txt"), "x"),
      ["manifest.json", "python-lock.txt", "wheels", "sd-scripts", "../escape.txt"]);
    await refused(escaping, `its member "../escape.txt" leaves its folder`);
    const cached = tampered((dir) => {
      mkdirSync(join(dir, "sd-scripts", "__pycache__"));
      writeFileSync(join(dir, "sd-scripts", "__pycache__", "train_network.cpython-311.pyc"), "x");
    });
    await refused(cached, "is a cache or checkout file trainer bundle never writes");
    expect(readdirSync(outside)).toEqual([]);
  });

  test("a bundle without its lock or sd-scripts, a file that is not a tar, an old format: one sentence each", async () => {
    await refused(tampered(() => {}, ["manifest.json", "wheels", "sd-scripts"]), "it holds no python-lock.txt");
    await refused(tampered(() => {}, ["manifest.json", "python-lock.txt", "wheels"]), "it holds no sd-scripts");
    const text = join(root, "notes.tar");
    writeFileSync(text, "not an archive\n".repeat(100));
    await refused(text, "is not a trainer bundle: it is not a tar archive");
    const old = tampered((dir) => {
      const manifest = JSON.parse(readFileSync(join(dir, "manifest.json"), "utf8"));
      writeFileSync(join(dir, "manifest.json"), JSON.stringify({ ...manifest, format: 1 }));
    });
    await refused(old, "is of format 1, this program reads format 2: make the bundle again");
  });

  test("a dangling symlink as --venv is refused, and nothing is made where it points", async () => {
    const parent = join(root, "dangling");
    mkdirSync(parent);
    symlinkSync(join(root, "nowhere"), join(parent, "env"));
    const result = await install({ archive: good, venv: join(parent, "env"), python: "python3", say: () => {} });
    expect(result).toEqual({ ok: false, error: expect.stringContaining("is a symbolic link; an environment is installed into a folder of its own") });
    expect(existsSync(join(root, "nowhere"))).toBe(false);
  });

  test("an install while another holds the venv's lock is refused; a lock whose holder is gone is taken over and its leftovers cleared", async () => {
    const parent = join(root, "locked");
    mkdirSync(join(parent, ".env.install-lock"), { recursive: true });
    await using holder = Bun.spawn(["cat"], { stdin: "pipe" });
    const identity = (pid: number) => {
      const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
      const startTicks = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[19]);
      return { pid, startTicks, bootId: readFileSync("/proc/sys/kernel/random/boot_id", "utf8").trim() };
    };
    writeFileSync(join(parent, ".env.install-lock", "owner.json"), JSON.stringify(identity(holder.pid)));
    mkdirSync(join(parent, ".env.partial-left"));
    const busy = await install({ archive: good, venv: join(parent, "env"), python: "python3", say: () => {} });
    expect(busy).toEqual({ ok: false, error: expect.stringContaining(`another install of ${parent}/env is running (process ${holder.pid}`) });
    expect(readdirSync(parent).sort()).toEqual([".env.install-lock", ".env.partial-left"]);
    holder.kill();
    await holder.exited;
    const said: string[] = [];
    const taken = await install({ archive: good, venv: join(parent, "env"), python: "python3", say: (l) => said.push(l) });
    expect(taken).toMatchObject({ ok: true });
    expect(said).toContain(`removed ${parent}/.env.partial-left, left by an interrupted install`);
    expect(readdirSync(parent)).toEqual(["env"]);
  });

  test("through the command, each refusal is one line on stderr and exit 1, never a stack trace", () => {
    const parent = join(root, "command");
    mkdirSync(parent);
    symlinkSync(join(root, "nowhere-either"), join(parent, "env"));
    const text = join(root, "short.tar");
    writeFileSync(text, "x");
    for (const argv of [[text], [good, "--venv", join(parent, "env")]]) {
      const res = Bun.spawnSync([process.execPath, join(import.meta.dir, "../../src/main.ts"), "trainer", "install", ...argv]);
      const lines = res.stderr.toString().trimEnd().split("\n");
      expect(res.exitCode).toBe(1);
      expect(lines).toHaveLength(1);
      expect(lines[0]).toStartWith("trainer install: nothing installed: ");
    }
  });
});
