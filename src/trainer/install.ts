// `lora-worker trainer install`: a bundle made into a new venv on a box without internet. It is built under a
// temporary name beside its final one and renamed whole, so the final name holds a whole environment or nothing;
// an existing folder is never changed. The venv holds sd-scripts' tree (`sd-scripts/`) and the bundle's manifest.
import {
  existsSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync,
} from "node:fs";
import { basename, dirname, join, resolve } from "node:path";
import { z } from "zod";
import { hasEntry, sha256Hex, statOrNull } from "../fs.ts";
import { lastLines, run } from "../os/run.ts";
import { fail, ok, type Result } from "../result.ts";
import { judgeMembers, judgeUnpacked } from "./bundle-check.ts";
import { takeInstallLock } from "./install-lock.ts";
import {
  FORMAT, MANIFEST, type Manifest, ManifestShape, PYTHON_PROBE, requirementsOf, SD_SCRIPTS, WHEELS,
} from "./manifest.ts";
import { PROVEN_SHORT } from "./sd-scripts-tree.ts";
import { tarMembers } from "./tar-members.ts";

/** Where environments go unless --venv says: /opt holds add-on software (FHS), owned by root and readable by the
 * service user, apart from the state dir that the worker writes and retention empties. */
export const DEFAULT_TRAINER_ROOT = "/opt/lora-worker/trainer";
/** The installed environment's copy of its bundle's manifest: how a second install of the same bundle knows it. */
export const INSTALLED_MANIFEST = "lora-worker-trainer.json";

export interface InstallOptions {
  archive: string;
  venv?: string;
  /** The interpreter the venv is made from. */
  python: string;
  say: (line: string) => void;
}

// pip sees only the bundle: no config file of the host's (an index, a constraint), no prompt.
const PIP_ENV = { PIP_CONFIG_FILE: "/dev/null", PIP_NO_INPUT: "1", PIP_DISABLE_PIP_VERSION_CHECK: "1" };

/** The two config lines that point the worker at an environment. */
export const configLines = (venv: string) =>
  `[trainer]\naccelerate = ${JSON.stringify(join(venv, "bin", "accelerate"))}\n` +
  `sd_scripts_dir = ${JSON.stringify(join(venv, SD_SCRIPTS))}`;

export async function install(opts: InstallOptions): Promise<Result<string>> {
  const archive = resolve(opts.archive);
  const read = await readManifest(archive);
  if (!read.ok) return read;
  const { manifest, text } = read.value;
  const digest = sha256Hex(text);
  const named = `${manifest.sd_scripts_commit?.slice(0, 7) ?? "other"}-${digest.slice(0, 12)}`;
  const venv = resolve(opts.venv ?? join(DEFAULT_TRAINER_ROOT, named));
  if (hasEntry(venv) && lstatSync(venv).isSymbolicLink()) {
    return fail(`${venv} is a symbolic link; an environment is installed into a folder of its own: name a path ` +
      "that does not exist with --venv");
  }
  if (existsSync(venv)) return sameInstall(venv, text, opts.say);
  const probed = await run([opts.python, "-c", PYTHON_PROBE]);
  if (probed.code !== 0) return fail(`${opts.python} does not run: ${lastLines(probed.output)}`);
  const version = probed.output.trim().split(" ")[0];
  if (version !== manifest.python_version) {
    return fail(`the bundle's wheels are for CPython ${manifest.python_version}, ${opts.python} is ` +
      `${version}: pass --python with a ${manifest.python_version}, or bundle for this one`);
  }
  const parent = dirname(venv);
  mkdirSync(parent, { recursive: true });
  const lock = takeInstallLock(parent, basename(venv));
  if (!lock.ok) return lock;
  using _held = lock.value;
  if (existsSync(venv)) return sameInstall(venv, text, opts.say);
  clearLeftovers(parent, basename(venv), opts.say);
  const work = mkdtempSync(join(parent, `.${basename(venv)}.partial-`));
  try {
    const built = await build(archive, manifest, work, venv, opts);
    if (!built.ok) return built;
    writeFileSync(join(built.value, INSTALLED_MANIFEST), text);
    renameSync(built.value, venv);
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
  const commit = manifest.sd_scripts_commit?.slice(0, 7) ?? `another commit than ${PROVEN_SHORT}`;
  opts.say(`installed ${venv}: ${manifest.wheels.length} packages, sd-scripts ${commit}`);
  return ok(configLines(venv));
}

// The archive's members are judged from its headers before any is read; then its manifest, the one thing trusted.
async function readManifest(archive: string): Promise<Result<{ manifest: Manifest; text: string }>> {
  const st = statOrNull(archive);
  if (st === null) return fail(`${archive} does not exist`);
  if (!st.isFile()) return fail(`${archive} is not a regular file: a bundle is the file trainer bundle wrote`);
  const members = tarMembers(archive);
  if (!members.ok) return fail(`${archive} is not a trainer bundle: ${members.error}`);
  const judged = judgeMembers(members.value);
  if (!judged.ok) return fail(`${archive} is refused: ${judged.error}`);
  const res = await run(["tar", "-xOf", archive, MANIFEST]);
  if (res.code !== 0) return fail(`${archive}'s ${MANIFEST} cannot be read: ${lastLines(res.output)}`);
  let json: unknown;
  try {
    json = JSON.parse(res.output);
  } catch {
    return fail(`${archive}'s ${MANIFEST} is not JSON`);
  }
  const format = (json as { format?: unknown } | null)?.format;
  if (format !== FORMAT) {
    return fail(`${archive}'s ${MANIFEST} is of format ${JSON.stringify(format)}, this program reads format ` +
      `${FORMAT}: make the bundle again with this program's trainer bundle`);
  }
  const parsed = ManifestShape.safeParse(json);
  if (!parsed.success) {
    return fail(`${archive}'s ${MANIFEST} is not a bundle manifest: ${z.prettifyError(parsed.error)}`);
  }
  return ok({ manifest: parsed.data, text: res.output });
}

// A second install of one bundle is the first one, untouched; a folder holding anything else is never changed.
function sameInstall(venv: string, text: string, say: (line: string) => void): Result<string> {
  const installed = join(venv, INSTALLED_MANIFEST);
  if (existsSync(installed) && readFileSync(installed, "utf8") === text) {
    say(`${venv} already holds this bundle's environment: nothing changed`);
    return ok(configLines(venv));
  }
  return fail(`${venv} exists and does not hold this bundle's environment; an existing folder is never ` +
    "changed: name a new one with --venv, or remove it first");
}

// What an interrupted install of the same name left: never an environment, since only a whole one is renamed.
function clearLeftovers(parent: string, name: string, say: (line: string) => void): void {
  for (const entry of readdirSync(parent)) {
    if (!entry.startsWith(`.${name}.partial-`)) continue;
    rmSync(join(parent, entry), { recursive: true, force: true });
    say(`removed ${join(parent, entry)}, left by an interrupted install`);
  }
}

// The venv, made at `work/<name>` and told it will live at `venv`; its path is what it hands back.
async function build(
  archive: string,
  manifest: Manifest,
  work: string,
  venv: string,
  opts: InstallOptions,
): Promise<Result<string>> {
  const unpacked = join(work, "bundle");
  mkdirSync(unpacked);
  opts.say(`unpacking ${archive}`);
  const tar = await run(["tar", "-xf", archive, "-C", unpacked, "--no-same-owner", "--no-same-permissions"]);
  if (tar.code !== 0) return fail(`tar could not unpack ${archive}: ${lastLines(tar.output)}`);
  // Nothing of the bundle runs before every file is the one the manifest names.
  const judged = await judgeUnpacked(unpacked, manifest);
  if (!judged.ok) return fail(`${archive} is refused: ${judged.error}`);
  const requirements = join(work, "requirements.txt");
  writeFileSync(requirements, requirementsOf(manifest));
  const env = join(work, basename(venv));
  const made = await run([opts.python, "-m", "venv", env]);
  if (made.code !== 0) return fail(`${opts.python} -m venv failed: ${lastLines(made.output)}`);
  opts.say(`installing ${manifest.wheels.length} wheels (pip --no-index, the bundle's files only)`);
  const python = join(env, "bin", "python");
  const pip = await run([
    python, "-m", "pip", "install", "--no-index", "--find-links", join(unpacked, WHEELS), "--require-hashes",
    "-r", requirements,
  ], { ...process.env, ...PIP_ENV });
  if (pip.code !== 0) return fail(`pip install from the bundle failed: ${lastLines(pip.output, 5)}`);
  renameSync(join(unpacked, SD_SCRIPTS), join(env, SD_SCRIPTS));
  relocate(env, venv);
  // pip compiled the packages (a .pyc names its source's temporary path, which Python corrects when it loads it);
  // sd-scripts' tree is compiled too, so a run as the service user, who cannot write here, finds it compiled. A
  // file of it that does not compile would fail the run: the install fails instead.
  const tree = join(env, SD_SCRIPTS);
  const compiled = await run([python, "-m", "compileall", "-q", "-s", env, "-p", venv, tree]);
  if (compiled.code !== 0) return fail(`sd-scripts' tree does not compile: ${lastLines(compiled.output)}`);
  return ok(env);
}

// A venv names its own path in its scripts (the `#!` of each console script, `activate`) and in pyvenv.cfg's
// `command`; the interpreter itself finds its packages relative to itself. Each text file that names the
// temporary path is made to name the final one.
function relocate(env: string, venv: string): void {
  const bin = join(env, "bin");
  const files = [...readdirSync(bin).map((name) => join(bin, name)), join(env, "pyvenv.cfg")];
  // The interpreter's own links lead out of the venv and name nothing of it.
  for (const file of files.filter((path) => lstatSync(path).isFile())) {
    const text = readFileSync(file, "utf8");
    if (text.includes(env)) writeFileSync(file, text.replaceAll(env, venv));
  }
}
