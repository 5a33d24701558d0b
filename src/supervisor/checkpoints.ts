// The run's saved states and intermediate LoRAs, as sd-scripts writes them beside the final LoRA with
// --save_every_n_steps and --save_state (train_util.py STEP_STATE_NAME, LAST_STATE_NAME):
//   <name>-step00000200.safetensors   the intermediate LoRA, saved first
//   <name>-step00000200-state/        accelerate's save_state: train_state.json (written first, by sd-scripts'
//                                     pre-hook), model.safetensors, optimizer.bin, scheduler.bin,
//                                     random_states_0.pkl (written last); the .bin/.pkl files are torch.save
//                                     zip archives, whose end-of-central-directory record is written last
//   <name>-state/                     the state saved after the last step: it cannot be resumed
// A state is complete when every file is whole; it is offered for a resume only once verified as the final LoRA
// is (a complete safetensors file with finite weights).
import { open, readdir, rm } from "node:fs/promises";
import { basename, dirname, join } from "node:path";
import { digestOf, readJsonOrNull, statOrNull } from "../fs.ts";
import type { Logger } from "../logger.ts";
import { fail, ok, type Result } from "../result.ts";
import { checkLayout, readHeaderFile } from "../safetensors/header.ts";
import { verifySafetensors } from "../safetensors/verify.ts";
import type { Checkpoint, ResumePoint } from "../job.ts";

const STATE_FILES = ["train_state.json", "model.safetensors", "optimizer.bin", "scheduler.bin", "random_states_0.pkl"];
const TORCH_ARCHIVES = STATE_FILES.filter((f) => f.endsWith(".bin") || f.endsWith(".pkl"));
// A zip's end-of-central-directory record: "PK\5\6", 22 bytes when the archive has no comment (torch writes none).
const EOCD_SIGNATURE = 0x06054b50;
const EOCD_BYTES = 22;
const STEP_DIGITS = 8;
// How often a state being written is looked at: its files are large and land over seconds.
const POLL_MS = 250;

export interface RunOutput {
  dir: string;
  name: string;
}

export function runOutput(outputFile: string): RunOutput {
  return { dir: dirname(outputFile), name: basename(outputFile, ".safetensors") };
}

const stepText = (step: number) => String(step).padStart(STEP_DIGITS, "0");
export const stateDir = (out: RunOutput, step: number) => join(out.dir, `${out.name}-step${stepText(step)}-state`);
export const intermediatePath = (out: RunOutput, step: number) =>
  join(out.dir, `${out.name}-step${stepText(step)}.safetensors`);

// Null when the state at `dir` is whole and is the one saved at `step`; otherwise what is missing.
export async function incompleteState(dir: string, step: number): Promise<string | null> {
  const missing = STATE_FILES.find((f) => !statOrNull(join(dir, f))?.isFile());
  if (missing !== undefined) return `${missing} is missing`;
  const saved = readJsonOrNull<{ current_step?: unknown }>(join(dir, "train_state.json"));
  if (saved?.current_step !== step) return `train_state.json does not name step ${step}`;
  const model = join(dir, "model.safetensors");
  const header = await readHeaderFile(model, statOrNull(model)?.size ?? 0);
  const layout = header.ok ? checkLayout(header.value.header.tensors, header.value.dataBytes) : header.error;
  if (layout !== null) return `model.safetensors is not whole: ${layout}`;
  for (const archive of TORCH_ARCHIVES) {
    if (!(await endsWithEocd(join(dir, archive)))) return `${archive} is not a whole archive`;
  }
  return null;
}

async function endsWithEocd(path: string): Promise<boolean> {
  const size = statOrNull(path)?.size ?? 0;
  if (size < EOCD_BYTES) return false;
  const tail = Buffer.alloc(EOCD_BYTES);
  const file = await open(path, "r");
  try {
    await file.read(tail, 0, EOCD_BYTES, size - EOCD_BYTES);
  } finally {
    await file.close();
  }
  return tail.readUInt32LE(0) === EOCD_SIGNATURE && tail.readUInt16LE(EOCD_BYTES - 2) === 0;
}

// A whole state whose network weights are finite: the digest of its files (kept when it is verified, compared
// when a resume starts from it), or why it cannot be resumed from.
export async function usableState(dir: string, step: number): Promise<Result<string, string>> {
  const incomplete = await incompleteState(dir, step);
  return incomplete === null ? fitWeights(dir) : fail(incomplete);
}

// A whole state's network weights, readable to the end and finite; then one digest over all its files, the weights'
// taken from that same read.
async function fitWeights(dir: string): Promise<Result<string, string>> {
  const verdict = await verifySafetensors(join(dir, "model.safetensors"));
  if (!verdict.ok) return fail(`model.safetensors: ${verdict.error.detail}`);
  if (verdict.value.nonFinite.tensors > 0) return fail("its network weights hold NaN or Inf");
  const summary = new Bun.CryptoHasher("sha256");
  for (const file of STATE_FILES) {
    const digest = file === "model.safetensors" ? verdict.value.sha256 : await digestOf(join(dir, file));
    if (digest === null) return fail(`${file} is missing`);
    summary.update(`${file}\0${digest}\n`);
  }
  return ok(summary.digest("hex"));
}

async function verifyIntermediate(out: RunOutput, step: number): Promise<Checkpoint | null> {
  const path = intermediatePath(out, step);
  const verdict = await verifySafetensors(path);
  if (!verdict.ok || verdict.value.nonFinite.tensors > 0) return null;
  return { step, path, sha256: verdict.value.sha256, bytes: verdict.value.bytes };
}

// The steps of the run's files on disk whose names end in `suffix` after the step, newest first.
async function savedSteps(out: RunOutput, suffix: string): Promise<number[]> {
  const pattern = new RegExp(`^${RegExp.escape(out.name)}-step(\\d{${STEP_DIGITS}})${RegExp.escape(suffix)}$`);
  const names = await readdir(out.dir).catch(() => [] as string[]);
  return names.flatMap((n) => pattern.exec(n)?.[1] ?? []).map(Number).sort((a, b) => b - a);
}
const stateSteps = (out: RunOutput) => savedSteps(out, "-state");

// The newest state a resume can start from, with its digest: whole, finite, and before the last step (sd-scripts
// refuses to resume a run whose state is at max_train_steps).
async function newestUsableState(out: RunOutput, totalSteps: number): Promise<{ step: number; digest: string } | null> {
  for (const step of await stateSteps(out)) {
    if (step >= totalSteps) continue;
    const usable = await usableState(stateDir(out, step), step);
    if (usable.ok) return { step, digest: usable.value };
  }
  return null;
}

// Every state of the run but `keep` (a killed run may leave one half written or half removed), and the last state.
async function removeStates(out: RunOutput, keep: number | null): Promise<void> {
  const doomed = (await stateSteps(out)).filter((s) => s !== keep).map((s) => stateDir(out, s));
  const dirs = [...doomed, join(out.dir, `${out.name}-state`)];
  await Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true })));
}

async function removeIntermediates(out: RunOutput): Promise<void> {
  await Promise.all((await savedSteps(out, ".safetensors")).map((s) => rm(intermediatePath(out, s), { force: true })));
}

// The intermediates still on disk as they were verified (sd-scripts removes older ones as it goes).
export function stillThere(checkpoints: Checkpoint[]): Checkpoint[] {
  return checkpoints.filter((c) => statOrNull(c.path)?.size === c.bytes);
}

interface FollowerDeps {
  out: RunOutput;
  // The run's max_train_steps: the state saved at the last step cannot be resumed, so it is not followed.
  totalSteps: number | null;
  log: Logger;
  jobId: string;
  // A state was verified (its files' digest kept): the record may offer it.
  saved: (step: number, checkpoint: Checkpoint | null, digest: string) => void;
}

// Follows the state sd-scripts says it is saving until it is whole and verified. Only the newest announcement
// matters: sd-scripts removes an older state only after announcing and saving a newer one.
export function followStates(deps: FollowerDeps) {
  let pending: number | null = null;
  let timer: ReturnType<typeof setTimeout> | null = null;
  let stopped = false;
  const check = async (step: number) => {
    timer = null;
    if (stopped || pending !== step) return;
    if ((await incompleteState(stateDir(deps.out, step), step)) !== null) {
      if (!stopped && pending === step) timer = setTimeout(() => look(step), POLL_MS);
      return;
    }
    pending = null;
    const fit = await fitWeights(stateDir(deps.out, step));
    if (!fit.ok) {
      return deps.log.warn("a saved state cannot be resumed from", { job_id: deps.jobId, step, why: fit.error });
    }
    deps.saved(step, await verifyIntermediate(deps.out, step), fit.value);
  };
  const look = (step: number) => {
    void check(step).catch((err: Error) => {
      deps.log.error("could not check a saved state", { job_id: deps.jobId, step, error: err.message });
    });
  };
  return {
    announced(step: number): void {
      if (deps.totalSteps !== null && step >= deps.totalSteps) return;
      pending = step;
      if (timer !== null) clearTimeout(timer);
      look(step);
    },
    stop(): void {
      stopped = true;
      if (timer !== null) clearTimeout(timer);
    },
  };
}

// The record's resume point after the run ended: what is on disk decides.
export async function closingResumePoint(
  out: RunOutput,
  totalSteps: number | null,
  succeeded: boolean,
  known: Checkpoint[],
): Promise<ResumePoint> {
  if (succeeded) {
    await removeStates(out, null);
    await removeIntermediates(out);
    const gone = "the states and intermediate LoRAs (but the preview points' kept ones) were removed once the " +
      "final LoRA was verified";
    return { step: null, state: null, digest: null, checkpoints: [], gone };
  }
  const usable = totalSteps === null ? null : await newestUsableState(out, totalSteps);
  const step = usable?.step ?? null;
  await removeStates(out, step);
  const checkpoints = stillThere(known);
  // A run that ended while its newest state was still being checked has that state's LoRA unverified.
  const newest = step === null || checkpoints.some((c) => c.step === step) ? null : await verifyIntermediate(out, step);
  return {
    step,
    state: step === null ? null : stateDir(out, step),
    digest: usable?.digest ?? null,
    checkpoints: newest ? [...checkpoints, newest] : checkpoints,
    gone: null,
  };
}
