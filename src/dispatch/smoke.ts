import { randomUUID } from "node:crypto";
import { rm } from "node:fs/promises";
import { join } from "node:path";
import { z } from "zod";
import type { Config, Device } from "../config/schema.ts";
import { NotAsExpected, pinChain, pinChild, type PinnedDir } from "../pinned-dir.ts";
import { fail, ok, type Result } from "../result.ts";
import { type DetailItem, fieldError, type JobRequest, readBody } from "../request/schema.ts";
import { KNOWN_PAIR } from "../likeness/known-pair.ts";
import { SMOKE_CLASS, SMOKE_FOLDER, SMOKE_TRIGGER, writeSmokeDataset } from "../smoke/dataset.ts";
import type { Dispatcher } from "./dispatch.ts";
import type { DispatchRefusal, DispatchResult } from "./refusal.ts";

// Smoke runs write in the handoff root, as arbo's jobs do: the run proves the worker can read a dataset there and
// publish a LoRA there. One folder per run, which `lora-worker smoke` removes once it has checked the results.
const SMOKE_OUTPUT_NAME = "smoke";
const SMOKE_SEED = 1;
// In the setgid handoff root, arbo's group keeps the run's folders.
const SHARED_DIR_MODE = 0o2770;

export const SmokeBody = z.strictObject({ device_index: z.int("must be an integer").min(0).max(63).optional() });

/** POST /smoke: the worker's own short run on a dataset it writes, dispatched as any request is. */
export async function dispatchSmoke(
  body: unknown,
  config: Config,
  dispatcher: Dispatcher,
  faults: readonly DetailItem[] = [],
): Promise<DispatchResult> {
  const parsed = readBody(SmokeBody, body, faults);
  if (parsed.data === null) return fail({ kind: "invalid", detail: parsed.detail });
  const model = config.smoke.base_model;
  if (model === undefined) {
    const detail = "no base model for smoke runs: set smoke.base_model in the config to an SDXL .safetensors " +
      "inside a model root, and restart the worker";
    return fail({ kind: "smoke_unavailable", detail });
  }
  const device = deviceFor(parsed.data.device_index, config);
  if (!device.ok) return device;
  // Nothing is written for a run that could not be claimed.
  const busy = dispatcher.busyWith();
  if (busy !== null) return fail({ kind: "busy", activeId: busy, unsupervised: false });
  const id = randomUUID();
  const folder = await pinSmokeFolder(config.handoff_root);
  if (!folder.ok) return folder;
  await using smoke = folder.value;
  const written = await writeDataset(smoke, id);
  if (!written.ok) return written;
  const request = smokeRequest(join(config.handoff_root, SMOKE_FOLDER, id), model, device.value);
  const result = await dispatcher.dispatchComposed(request);
  if (!result.ok) await rm(smoke.at(id), { recursive: true, force: true });
  return result;
}

function smokeRequest(root: string, model: string, device: Device): JobRequest {
  return {
    dataset_dir: join(root, "dataset"),
    base_model_path: model,
    output_dir: join(root, "out"),
    output_name: SMOKE_OUTPUT_NAME,
    trigger: SMOKE_TRIGGER,
    subject_class: SMOKE_CLASS,
    repeats: 1,
    tier: "smoke",
    device_index: device.index,
    seed: SMOKE_SEED,
    samples: 1,
  };
}

// A host with one device needs no choice; with several, the operator names one.
function deviceFor(index: number | undefined, config: Config): Result<Device, DispatchRefusal> {
  if (index === undefined && config.devices.length === 1) return ok(config.devices[0]!);
  const known = config.devices.map((d) => `${d.index} (${d.name}, ${d.class})`).join(", ");
  const device = config.devices.find((d) => d.index === index);
  if (device) return ok(device);
  const msg = index === undefined
    ? `required when more than one device is configured; configured: ${known}`
    : `no configured device ${index}; configured: ${known}`;
  const type = index === undefined ? "missing" : "unknown_device";
  return fail({ kind: "invalid", detail: [fieldError("device_index", msg, type)] });
}

// The smoke folder as the worker made it: created when missing, never reached through a link arbo laid there
// (pinned-dir.ts), so nothing below is written outside the handoff root.
async function pinSmokeFolder(handoffRoot: string): Promise<Result<PinnedDir, DispatchRefusal>> {
  try {
    return ok(await pinChain(handoffRoot, [SMOKE_FOLDER], SHARED_DIR_MODE));
  } catch (err) {
    return fail({ kind: "smoke_unavailable", detail: `the smoke run's folder cannot be used: ${described(err)}` });
  }
}

// The run's own folder is new (a fresh id, made exclusively); its files are written in it as it was opened.
async function writeDataset(smoke: PinnedDir, id: string): Promise<Result<void, DispatchRefusal>> {
  try {
    await using run = await pinChild(smoke, id, { mode: SHARED_DIR_MODE, exclusive: true });
    await using dataset = await pinChild(run, "dataset", { mode: SHARED_DIR_MODE, exclusive: true });
    writeSmokeDataset(dataset.at(""), KNOWN_PAIR);
    return ok(undefined);
  } catch (err) {
    await rm(smoke.at(id), { recursive: true, force: true });
    const detail = `the smoke dataset could not be written into the handoff root: ${described(err)}`;
    return fail({ kind: "smoke_unavailable", detail });
  }
}

// What failed, in words that name the folder under the handoff root rather than a descriptor's path.
function described(err: unknown): string {
  if (err instanceof NotAsExpected) {
    return `${err.rel} in the handoff root is ${err.found}, not a folder the worker made`;
  }
  return (err as NodeJS.ErrnoException).code ?? (err as Error).message;
}
