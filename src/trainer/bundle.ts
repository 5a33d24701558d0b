// `lora-worker trainer bundle`: on a machine that reaches PyPI, one archive with all a trainer environment needs
// offline: sd-scripts' tree, the lock, every wheel the lock names for the target Python and platform, and a
// manifest that says which of each. Plain tar: the wheels are zip files already, and every box has tar.
import {
  copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, renameSync, rmSync, statSync, writeFileSync,
} from "node:fs";
import { basename, dirname, join, resolve } from "node:path";
import { digestOf, sha256Hex } from "../fs.ts";
import { lastLines, run } from "../os/run.ts";
import { fail, ok, type Result } from "../result.ts";
import { LOCK_PYTHON, LOCK_TEXT, normalName, PYTHON_LOCK, type LockedPackage } from "./lock.ts";
import {
  BUNDLE_PARTS, FORMAT, LOCK_FILE, MANIFEST, type Manifest, PYTHON_PROBE, SD_SCRIPTS, WHEELS,
} from "./manifest.ts";
import { describeTree, judgeTree, PROVEN_COMMIT, PROVEN_SHORT, treeFiles } from "./sd-scripts-tree.ts";

export interface BundleOptions {
  sdScripts: string;
  out: string;
  /** The interpreter whose pip fetches the wheels (and whose version and platform are the defaults). */
  python: string;
  pythonVersion?: string;
  platform?: string;
  /** Take a tree that is not the proven commit (said in the output and the manifest). */
  otherSdScripts: boolean;
  /** The lock to fetch: the built-in one unless given. */
  lock?: { pins: readonly LockedPackage[]; text: string };
  /** The environment pip runs in: its config and index come from it. */
  env: Record<string, string | undefined>;
  say: (line: string) => void;
}

// A wheel's file name: name-version(-build)?-python-abi-platform.whl, the name with `_` for `-`.
const WHEEL_NAME = /^([^-]+)-([^-]+)(?:-\d[^-]*)?-[^-]+-[^-]+-[^-]+\.whl$/;

export async function bundle(opts: BundleOptions): Promise<Result<string>> {
  const out = resolve(opts.out);
  if (existsSync(out)) return fail(`${out} exists; a bundle is never written over: name a new file`);
  if (!existsSync(dirname(out))) return fail(`${dirname(out)} does not exist`);
  const script = join(opts.sdScripts, "sdxl_train_network.py");
  if (!existsSync(script)) return fail(`${opts.sdScripts} holds no sdxl_train_network.py: not an sd-scripts tree`);
  const tree = judgeTree(opts.sdScripts);
  if (!tree.proven && !opts.otherSdScripts) {
    return fail(`${opts.sdScripts} is ${describeTree(tree)}; pass --other-sd-scripts to bundle it anyway (the ` +
      `recipe is proven on ${PROVEN_SHORT} only)`);
  }
  opts.say(tree.proven ? describeTree(tree) : `${describeTree(tree)}: taken because --other-sd-scripts was given`);
  const target = await targetOf(opts);
  if (!target.ok) return target;
  opts.say(`wheels for CPython ${target.value.pythonVersion}, ${target.value.platform}` +
    (target.value.pythonVersion === LOCK_PYTHON ? "" : ` (the lock was resolved on CPython ${LOCK_PYTHON})`));
  const lock = opts.lock ?? { pins: PYTHON_LOCK, text: LOCK_TEXT };
  const lockDigest = sha256Hex(lock.text);
  const staging = mkdtempSync(join(dirname(out), `.${basename(out)}.partial-`));
  try {
    const wheels = await fetchWheels(opts, lock.pins, join(staging, WHEELS));
    if (!wheels.ok) return wheels;
    copyTree(opts.sdScripts, join(staging, SD_SCRIPTS));
    const manifest: Manifest = {
      format: FORMAT,
      sd_scripts_commit: tree.proven ? PROVEN_COMMIT : null,
      sd_scripts_digest: tree.digest,
      lock_digest: lockDigest,
      python_version: target.value.pythonVersion,
      platform: target.value.platform,
      wheels: wheels.value,
    };
    writeFileSync(join(staging, MANIFEST), `${JSON.stringify(manifest, null, 2)}\n`);
    writeFileSync(join(staging, LOCK_FILE), lock.text);
    const partial = `${staging}.tar`;
    const tar = await run(["tar", "-cf", partial, "-C", staging, ...BUNDLE_PARTS]);
    if (tar.code !== 0) {
      rmSync(partial, { force: true });
      return fail(`tar failed: ${tar.output.trim()}`);
    }
    renameSync(partial, out);
    const wheelBytes = manifest.wheels.reduce((sum, w) => sum + statSync(join(staging, WHEELS, w.file)).size, 0);
    opts.say(`holds: sd-scripts ${manifest.sd_scripts_commit?.slice(0, 7) ?? "(another commit)"} ` +
      `(${tree.files} files), the lock (${lock.pins.length} packages, sha256 ${lockDigest.slice(0, 12)}), ` +
      `${manifest.wheels.length} wheels (${gib(wheelBytes)})`);
    return ok(`${out}: ${gib(statSync(out).size)}`);
  } finally {
    rmSync(staging, { recursive: true, force: true });
  }
}

const gib = (bytes: number) =>
  bytes >= 1024 ** 3 ? `${(bytes / 1024 ** 3).toFixed(2)} GiB` : `${(bytes / 1024 ** 2).toFixed(1)} MiB`;

interface Target {
  pythonVersion: string;
  platform: string;
}

async function targetOf(opts: BundleOptions): Promise<Result<Target>> {
  if (opts.pythonVersion !== undefined && !/^3\.\d{1,2}$/.test(opts.pythonVersion)) {
    const got = JSON.stringify(opts.pythonVersion);
    return fail(`--python-version must be a CPython major.minor such as 3.11, got ${got}`);
  }
  const asked = await run([opts.python, "-c", PYTHON_PROBE]);
  if (asked.code !== 0) return fail(`${opts.python} does not run: ${asked.output.trim()}`);
  const [version, platform] = asked.output.trim().split(" ") as [string, string];
  return ok({ pythonVersion: opts.pythonVersion ?? version, platform: opts.platform ?? platform });
}

// pip's own download, one pin at a time, wheels only and no dependency resolution: the lock is whole, so each
// pin is one file, and a pin with no wheel for the target is named by itself.
async function fetchWheels(
  opts: BundleOptions,
  pins: readonly LockedPackage[],
  dir: string,
): Promise<Result<Manifest["wheels"]>> {
  mkdirSync(dir);
  const target = [
    ...(opts.pythonVersion === undefined ? [] : ["--python-version", opts.pythonVersion]),
    ...(opts.platform === undefined ? [] : ["--platform", opts.platform]),
  ];
  const wheels: Manifest["wheels"] = [];
  for (const [i, pin] of pins.entries()) {
    const spec = `${pin.name}==${pin.version}`;
    const before = new Set(readdirSync(dir));
    const argv = pin.fromSource
      ? [opts.python, "-m", "pip", "wheel", "--no-deps", "--no-binary", pin.name, "--wheel-dir", dir, spec]
      : [opts.python, "-m", "pip", "download", "--only-binary=:all:", "--no-deps", ...target, "--dest", dir, spec];
    const res = await run(argv, opts.env);
    const how = pin.fromSource ? " (built from source)" : "";
    if (res.code !== 0) return fail(`pip could not fetch ${spec}${how}: ${lastLines(res.output)}`);
    const file = wheelOf(pin, readdirSync(dir).filter((name) => !before.has(name)), dir);
    if (!file.ok) return file;
    const sha256 = (await digestOf(join(dir, file.value)))!;
    wheels.push({ file: file.value, name: pin.name, version: pin.version, sha256 });
    opts.say(`  ${i + 1}/${pins.length} ${file.value}`);
  }
  return ok(wheels);
}

// The one wheel a pin's download added. A wheel already in the folder is not added again, hence the look at the
// folder's whole listing when nothing is new.
function wheelOf(pin: LockedPackage, added: string[], dir: string): Result<string> {
  const matches = (name: string) => {
    const parts = WHEEL_NAME.exec(name);
    return parts !== null && normalName(parts[1]!) === normalName(pin.name) && parts[2] === pin.version;
  };
  const found = (added.length > 0 ? added : readdirSync(dir)).filter(matches);
  if (found.length !== 1) {
    const fetched = added.join(", ") || "nothing new";
    return fail(`pip fetched ${fetched} for ${pin.name}==${pin.version}, not one wheel of it`);
  }
  if (pin.fromSource && !found[0]!.endsWith("-none-any.whl")) {
    return fail(`${found[0]} is built for this machine only; a wheel built from source must be pure Python`);
  }
  return ok(found[0]!);
}

function copyTree(from: string, to: string): void {
  for (const rel of treeFiles(from)) {
    mkdirSync(dirname(join(to, rel)), { recursive: true });
    copyFileSync(join(from, rel), join(to, rel));
  }
}
