import { describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { bundle, type BundleOptions } from "../../src/trainer/bundle.ts";
import { install } from "../../src/trainer/install.ts";
import { parseLock } from "../../src/trainer/lock.ts";
import { treeFingerprint } from "../support/scratch-files.ts";
import { writeStandInSdScripts } from "../support/stand-in-sd-scripts.ts";
import { writeWheel } from "../support/wheels.ts";

// pip builds a venv and installs two wheels: seconds, more on a loaded machine.
const TIMEOUT_MS = 120_000;

interface Scratch extends Disposable {
  dir: string;
  /** What `trainer bundle` is given: the tiny lock, its wheels as pip's only source, a stand-in sd-scripts. */
  options(lockText: string, extra?: Partial<BundleOptions>): BundleOptions;
  said: string[];
}

// Two tiny wheels written by the test stand in for PyPI: pip reads them from a folder, never the network (its
// config is /dev/null, its index off).
function makeScratch(accelerateNeeds: string[] = []): Scratch {
  const dir = mkdtempSync(join(tmpdir(), "lora-worker-trainer-bundle-"));
  const index = join(dir, "index");
  mkdirSync(index);
  writeWheel(index, { name: "fakeaccel", version: "1.0", script: "accelerate", says: "usage: accelerate", requires: ["tinydep", ...accelerateNeeds] });
  writeWheel(index, { name: "tinydep", version: "2.0" });
  writeStandInSdScripts(join(dir, "sd-scripts"));
  const said: string[] = [];
  // A home of its own: pip and what it runs may leave caches there.
  mkdirSync(join(dir, "home"));
  const env = { PATH: process.env.PATH, HOME: join(dir, "home"), PIP_CONFIG_FILE: "/dev/null", PIP_NO_INDEX: "1", PIP_FIND_LINKS: index };
  return {
    dir,
    said,
    options: (lockText, extra = {}) => ({
      sdScripts: join(dir, "sd-scripts"), out: join(dir, "trainer.tar"), python: "python3", otherSdScripts: true,
      lock: { pins: parseLock(lockText), text: lockText }, env, say: (line) => said.push(line), ...extra,
    }),
    [Symbol.dispose]: () => rmSync(dir, { recursive: true, force: true }),
  };
}

const LOCK = "# a tiny lock\nfakeaccel==1.0\ntinydep==2.0\n";
const tarList = (archive: string) => Bun.spawnSync(["tar", "-tf", archive]).stdout.toString().split("\n").filter(Boolean);

describe("trainer bundle and install, round trip offline", () => {
  test("a bundle holds the tree, the lock and one wheel per pin with its hash; the install runs its accelerate from the final path, a second install changes nothing and says so, another bundle into that folder is refused", async () => {
    using s = makeScratch();
    const bundled = await bundle(s.options(LOCK));
    expect(bundled).toMatchObject({ ok: true });
    const listed = tarList(join(s.dir, "trainer.tar"));
    expect(listed).toContain("wheels/fakeaccel-1.0-py3-none-any.whl");
    expect(listed).toContain("sd-scripts/sdxl_train_network.py");
    expect(listed).toContain("python-lock.txt");
    const manifest = JSON.parse(Bun.spawnSync(["tar", "-xOf", join(s.dir, "trainer.tar"), "manifest.json"]).stdout.toString());
    expect(manifest.sd_scripts_commit).toBeNull();
    expect(manifest.wheels.map((w: { file: string }) => w.file)).toEqual(["fakeaccel-1.0-py3-none-any.whl", "tinydep-2.0-py3-none-any.whl"]);
    expect(s.said.some((line) => line.includes("taken because --other-sd-scripts was given"))).toBe(true);

    const venv = join(s.dir, "opt", "env");
    const installed = await install({ archive: join(s.dir, "trainer.tar"), venv, python: "python3", say: (l) => s.said.push(l) });
    expect(installed).toEqual({ ok: true, value: `[trainer]\naccelerate = "${venv}/bin/accelerate"\nsd_scripts_dir = "${venv}/sd-scripts"` });
    // The console script was written under the temporary name; it runs from the final one.
    const accelerate = Bun.spawnSync([join(venv, "bin", "accelerate")], { env: { PATH: "/usr/bin:/bin" } });
    expect(accelerate.stdout.toString()).toBe("usage: accelerate\n");
    expect(readFileSync(join(venv, "bin", "accelerate"), "utf8")).toStartWith(`#!${venv}/bin/python`);
    expect(existsSync(join(venv, "sd-scripts", "sdxl_train_network.py"))).toBe(true);
    expect(readdirSync(join(s.dir, "opt"))).toEqual(["env"]);

    // Installed again from the same bundle: nothing changes, and it says so.
    const before = treeFingerprint(venv);
    const said: string[] = [];
    const again = await install({ archive: join(s.dir, "trainer.tar"), venv, python: "python3", say: (l) => said.push(l) });
    expect(again).toEqual(installed);
    expect(said).toEqual([`${venv} already holds this bundle's environment: nothing changed`]);
    // Another bundle (another lock) into the same folder: refused, the folder untouched (the contrast).
    const other = join(s.dir, "other.tar");
    expect(await bundle(s.options("fakeaccel==1.0\ntinydep==2.0\n# another lock\n", { out: other }))).toMatchObject({ ok: true });
    const refused = await install({ archive: other, venv, python: "python3", say: () => {} });
    expect(!refused.ok && refused.error).toContain("exists and does not hold this bundle's environment");
    expect(treeFingerprint(venv)).toEqual(before);
  }, TIMEOUT_MS);

  test("an install that fails half way (a dependency missing from the lock) leaves neither the venv nor a partial folder", async () => {
    using s = makeScratch(["notlocked"]);
    expect(await bundle(s.options(LOCK))).toMatchObject({ ok: true });
    const parent = join(s.dir, "opt");
    const failed = await install({ archive: join(s.dir, "trainer.tar"), venv: join(parent, "env"), python: "python3", say: () => {} });
    expect(failed).toMatchObject({ ok: false });
    expect(!failed.ok && failed.error).toContain("pip install from the bundle failed");
    expect(!failed.ok && failed.error).toContain("notlocked");
    expect(readdirSync(parent)).toEqual([]);
  }, TIMEOUT_MS);

  test("a tree that is not sd-scripts 48d368f is refused without --other-sd-scripts, and nothing is written", async () => {
    using s = makeScratch();
    const refused = await bundle(s.options(LOCK, { otherSdScripts: false }));
    expect(refused).toMatchObject({ ok: false });
    expect(!refused.ok && refused.error).toContain("is not sd-scripts 48d368f: of its files, 4 changed (library/config_util.py, library/sdxl_train_util.py, library/train_util.py, sdxl_train_network.py)");
    expect(!refused.ok && refused.error).toContain("pass --other-sd-scripts");
    expect(readdirSync(s.dir).sort()).toEqual(["home", "index", "sd-scripts"]);
  }, TIMEOUT_MS);

  test("a pin with no wheel in the index is named, and no archive or partial folder is left", async () => {
    using s = makeScratch();
    const refused = await bundle(s.options("fakeaccel==1.0\ntinydep==3.0\n"));
    expect(refused).toMatchObject({ ok: false });
    expect(!refused.ok && refused.error).toStartWith("pip could not fetch tinydep==3.0: ");
    expect(readdirSync(s.dir).sort()).toEqual(["home", "index", "sd-scripts"]);
  }, TIMEOUT_MS);
});
