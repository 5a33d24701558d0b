// The LoRA saved at each preview point, kept past sd-scripts' removal of the older intermediates: a hard link in the
// run directory's kept/ folder, so the one the likeness report names best can be fetched until retention removes
// the job's directory. A run without previews keeps none.
import { link, mkdir, rm } from "node:fs/promises";
import { basename, dirname, join } from "node:path";
import type { Checkpoint } from "../job.ts";
import { verifySafetensors } from "../safetensors/verify.ts";
import { intermediatePath, type RunOutput } from "./checkpoints.ts";

const keptDir = (out: RunOutput) => join(out.dir, "kept");

export const isKept = (out: RunOutput, checkpoint: Checkpoint) => dirname(checkpoint.path) === keptDir(out);

/** The record's list: the intermediates still there, each preview point's by its kept link. */
export function withKept(checkpoints: Checkpoint[], kept: Checkpoint[]): Checkpoint[] {
  const others = checkpoints.filter((c) => !kept.some((k) => k.step === c.step));
  return [...others, ...kept].toSorted((a, b) => a.step - b.step);
}

/**
 * The LoRA saved at `step`, linked into kept/ as soon as its state is announced (sd-scripts writes the LoRA first,
 * and removes it at a later save), then verified as every intermediate is; null when it was gone already or is not
 * a whole, finite LoRA (its link goes then).
 */
export async function keepLora(out: RunOutput, step: number): Promise<Checkpoint | null> {
  const source = intermediatePath(out, step);
  const path = join(keptDir(out), basename(source));
  await mkdir(keptDir(out), { recursive: true });
  const linked = await link(source, path).then(() => true, (err: NodeJS.ErrnoException) => {
    if (err.code === "EEXIST") return true;
    if (err.code === "ENOENT") return false;
    throw err;
  });
  if (!linked) return null;
  const verdict = await verifySafetensors(path);
  if (verdict.ok && verdict.value.nonFinite.tensors === 0) {
    return { step, path, sha256: verdict.value.sha256, bytes: verdict.value.bytes };
  }
  await rm(path, { force: true });
  return null;
}

/** At the run's end: the preview points' LoRAs not kept yet that are still on disk (the last point's, saved at the
 * run's last step, which no state follows), kept beside the others. */
export async function keepRest(out: RunOutput, pointSteps: number[], kept: Checkpoint[]): Promise<Checkpoint[]> {
  const more: Checkpoint[] = [];
  for (const step of pointSteps.filter((s) => !kept.some((k) => k.step === s))) {
    const checkpoint = await keepLora(out, step);
    if (checkpoint !== null) more.push(checkpoint);
  }
  return withKept(kept, more);
}
