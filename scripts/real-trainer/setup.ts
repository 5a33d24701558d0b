// What a real run needs and the repository cannot hold, made once outside it and reused: sd-scripts' venv (torch
// from this machine's wheels), a full-size SDXL checkpoint with random weights, and a pair of small CLIP tokenizers.
import { chmodSync, copyFileSync, existsSync, mkdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs";
import { basename, join } from "node:path";
import { checkBaseModelHeader } from "../../src/request/base-model.ts";
import { CheckFailed, mustRun, tail } from "./steps.ts";

const HERE = import.meta.dir;
// The wheels this project's machines hold for Python 3.11 (pip takes them from disk).
const TORCH = ["torch==2.14.1", "torchvision==0.29.1"];
// 0.50 is the first bitsandbytes whose AdamW8bit runs on the CPU.
const BITSANDBYTES = "bitsandbytes>=0.50";
const READY_MARK = ".lora-worker-real-trainer";

/** sd-scripts' requirements.txt pins, without its `-e .` (sd-scripts runs from its checkout) and a CPU bitsandbytes. */
export function requirements(sdScripts: string): string[] {
  return readFileSync(join(sdScripts, "requirements.txt"), "utf8")
    .split("\n")
    .map((line) => line.replace(/#.*$/, "").trim())
    .filter((line) => line !== "" && !line.startsWith("-e"))
    .map((line) => (/^bitsandbytes\b/.test(line) ? BITSANDBYTES : line));
}

export async function ensureVenv(work: string, sdScripts: string): Promise<string> {
  const venv = join(work, "venv");
  const wanted = [...TORCH, ...requirements(sdScripts)].join("\n");
  const mark = join(venv, READY_MARK);
  if (existsSync(mark) && readFileSync(mark, "utf8") === wanted) return `reused ${venv}`;
  rmSync(venv, { recursive: true, force: true });
  const log = join(work, "logs", "venv.log");
  await mustRun([pythonCommand(), "-m", "venv", venv], log);
  const pip = join(venv, "bin", "pip");
  await mustRun([pip, "install", ...TORCH], log);
  const file = join(work, "requirements.txt");
  writeFileSync(file, `${requirements(sdScripts).join("\n")}\n`);
  await mustRun([pip, "install", "-r", file], log);
  writeFileSync(mark, wanted);
  return `built ${venv} (${log})`;
}

// The wheels on disk are for CPython 3.11.
function pythonCommand(): string {
  for (const candidate of ["python3.11", "python3"]) {
    const res = Bun.spawnSync([candidate, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"]);
    if (res.exitCode === 0 && res.stdout.toString().trim() === "3.11") return candidate;
  }
  throw new CheckFailed("no Python 3.11 on PATH (the torch wheels on this machine are for 3.11)");
}

// trainer.accelerate: the CPU adapter, placed beside the venv's real accelerate, which it execs.
export function placeAdapter(work: string): string {
  const adapter = join(work, "venv", "bin", "cpu-accelerate");
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

const venvPython = (work: string) => join(work, "venv", "bin", "python");
