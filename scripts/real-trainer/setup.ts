// What a real run needs and the repository cannot hold, made once outside it and reused: the trainer's venv (built
// as an operator builds it: `lora-worker trainer bundle`, then `trainer install` without a network), a full-size
// SDXL checkpoint with random weights, and a pair of small CLIP tokenizers.
import { chmodSync, copyFileSync, existsSync, mkdirSync, readFileSync, renameSync, rmSync, statSync } from "node:fs";
import { basename, join } from "node:path";
import { checkBaseModelHeader } from "../../src/request/base-model.ts";
import { INSTALLED_MANIFEST } from "../../src/trainer/install.ts";
import { LOCK_DIGEST } from "../../src/trainer/lock.ts";
import { judgeTree } from "../../src/trainer/sd-scripts-tree.ts";
import { CheckFailed, mustRun, tail } from "./steps.ts";

const HERE = import.meta.dir;

/** The venv and its sd-scripts tree (`trainer install` lays it inside the venv). */
export const venvDir = (work: string) => join(work, "venv");
export const installedSdScripts = (work: string) => join(venvDir(work), "sd-scripts");

/**
 * The bundle of this lock and this sd-scripts tree, made once by the compiled binary (PyPI, and the torch wheels
 * on this machine's disk through pip's config), then installed with no network (`unshare -n` where this user may
 * make a namespace). A venv left by another bundle, or by the harness before bundles, is replaced: the harness
 * owns it, and `trainer install` never changes an existing folder.
 */
export async function ensureVenv(work: string, sdScripts: string, binary: string): Promise<string> {
  const bundles = join(work, "bundles");
  mkdirSync(bundles, { recursive: true });
  const archive = join(bundles, `trainer-${LOCK_DIGEST.slice(0, 12)}-${judgeTree(sdScripts).digest.slice(0, 12)}.tar`);
  const log = join(work, "logs", "venv.log");
  const made = existsSync(archive) ? `reused ${archive}` : tail(await mustRun([binary, "trainer", "bundle", "--sd-scripts", sdScripts, "--out", archive], log), 1);
  const venv = venvDir(work);
  const manifest = Bun.spawnSync(["tar", "-xOf", archive, "manifest.json"]).stdout.toString();
  const installed = join(venv, INSTALLED_MANIFEST);
  if (existsSync(venv) && !(existsSync(installed) && readFileSync(installed, "utf8") === manifest)) {
    rmSync(venv, { recursive: true, force: true });
  }
  const offline = Bun.spawnSync(["unshare", "-n", "true"]).exitCode === 0 ? ["unshare", "-n"] : [];
  const out = await mustRun([...offline, binary, "trainer", "install", archive, "--venv", venv, "--python", pythonCommand()], log);
  const said = out.includes("nothing changed") ? `reused ${venv}` : `installed ${venv}${offline.length > 0 ? " offline (unshare -n)" : ""}`;
  return `${made}; ${said}`;
}

// The bundle's wheels are for CPython 3.11, the Python of this machine's torch wheels.
function pythonCommand(): string {
  for (const candidate of ["python3.11", "python3"]) {
    const res = Bun.spawnSync([candidate, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"]);
    if (res.exitCode === 0 && res.stdout.toString().trim() === "3.11") return candidate;
  }
  throw new CheckFailed("no Python 3.11 on PATH (the torch wheels on this machine are for 3.11)");
}

// trainer.accelerate: the CPU adapter, placed beside the venv's real accelerate, which it execs.
export function placeAdapter(work: string): string {
  const adapter = join(venvDir(work), "bin", "cpu-accelerate");
  copyFileSync(join(HERE, "cpu-accelerate"), adapter);
  chmodSync(adapter, 0o755);
  return adapter;
}

export const checkpointPath = (work: string) => join(work, "models", "sdxl-random.safetensors");

/**
 * sd-scripts' own model classes and save function write it, beside its final name, then the worker's own check of a
 * base model (the header names the four SDXL parts and covers the file) passes it before it is renamed: a half or a
 * wrong file is never reused. sd-scripts' writer picks the format by the file name's extension, so the name being
 * written ends in `.safetensors` too (`<model>.partial` got a torch zip archive).
 */
export async function ensureCheckpoint(work: string, sdScripts: string): Promise<string> {
  const model = checkpointPath(work);
  if (existsSync(model)) return `reused ${model} (${await checkedModel(model)})`;
  mkdirSync(join(work, "models"), { recursive: true });
  const partial = join(work, "models", `.partial-${basename(model)}`);
  const env = { ...process.env, PYTHONPATH: sdScripts };
  const log = join(work, "logs", "checkpoint.log");
  const out = await mustRun([venvPython(work), join(HERE, "make-checkpoint.py"), partial], log, { env });
  const checked = await checkedModel(partial);
  renameSync(partial, model);
  return `made ${model}: ${out.trim().split("\n").at(-1)}; ${checked}`;
}

// What `POST /train` asks of a base model (request/base-model.ts), asked of the harness's own before it is used.
async function checkedModel(path: string): Promise<string> {
  const verdict = await checkBaseModelHeader(path, path, statSync(path).size);
  if (!verdict.ok) throw new CheckFailed(`the worker refuses it as a base model: ${verdict.error.msg}`);
  return "the worker's base-model check passes";
}

// Written offline and loaded back by the venv's transformers (make-tokenizers.py checks them itself).
export async function writeTokenizerSource(work: string, dir: string): Promise<string> {
  rmSync(dir, { recursive: true, force: true });
  const env = { ...process.env, HF_HUB_OFFLINE: "1", HF_HOME: join(work, "hf-home-empty") };
  const log = join(work, "logs", "tokenizers.log");
  return tail(await mustRun([venvPython(work), join(HERE, "make-tokenizers.py"), dir], log, { env }), 2);
}

const venvPython = (work: string) => join(venvDir(work), "bin", "python");
