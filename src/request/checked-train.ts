import { stat } from "node:fs/promises";
import { join } from "node:path";
import type { Config, Device } from "../config/schema.ts";
import { TIERS } from "../recipe/hyperparameters.ts";
import { resolveInside } from "./contained-path.ts";
import { findImageDir } from "./dataset-images.ts";
import { TrainRequest } from "./train-request.ts";
import { detailFromIssues, fieldError, type DetailItem } from "./validation-error.ts";

// A request that passed every rule, with the resolved paths the trainer will be given.
export interface CheckedTrain {
  request: TrainRequest;
  device: Device;
  imageDir: string;
  imageCount: number;
  baseModel: string;
  outputDir: string;
  outputFile: string;
}

export type CheckResult =
  | { ok: true; value: CheckedTrain }
  | { ok: false; kind: "invalid"; detail: DetailItem[] }
  | { ok: false; kind: "output_exists"; detail: string };

type Field<T> = { ok: true; value: T } | { ok: false; error: DetailItem };

export async function checkTrain(body: unknown, config: Config): Promise<CheckResult> {
  const parsed = TrainRequest.safeParse(body);
  if (!parsed.success) return { ok: false, kind: "invalid", detail: detailFromIssues(parsed.error.issues, body) };
  const request = parsed.data;
  const [dataset, model, output, device] = await Promise.all([
    checkDataset(request.dataset_dir, config),
    checkBaseModel(request.base_model_path, config),
    checkOutputDir(request.output_dir, config),
    Promise.resolve(checkDevice(request, config)),
  ]);
  const errors = [dataset, model, output, device].flatMap((f) => (f.ok ? [] : [f.error]));
  if (!dataset.ok || !model.ok || !output.ok || !device.ok) return { ok: false, kind: "invalid", detail: errors };
  const outputFile = join(output.value, `${request.output_name}.safetensors`);
  if (await exists(outputFile)) {
    return { ok: false, kind: "output_exists", detail: `output_dir already holds ${request.output_name}.safetensors; choose another output_name or remove the file` };
  }
  return {
    ok: true,
    value: { request, device: device.value, imageDir: dataset.value.dir, imageCount: dataset.value.count, baseModel: model.value, outputDir: output.value, outputFile },
  };
}

async function checkDataset(path: string, config: Config): Promise<Field<{ dir: string; count: number }>> {
  const inside = await resolveInside(path, [config.handoff_root], false);
  if (!inside.ok) return fail("dataset_dir", inside.msg, inside.type);
  if (!(await stat(inside.real)).isDirectory()) return fail("dataset_dir", `${path} is not a directory`, "not_a_directory");
  const images = await findImageDir(inside.real);
  return images.ok ? { ok: true, value: images } : fail("dataset_dir", `${path} ${images.msg}`, images.type);
}

async function checkBaseModel(path: string, config: Config): Promise<Field<string>> {
  if (!path.endsWith(".safetensors")) return fail("base_model_path", "must name a .safetensors file (other formats can run code on load)", "not_safetensors");
  const inside = await resolveInside(path, config.model_roots, false);
  if (!inside.ok) return fail("base_model_path", inside.msg, inside.type);
  if (!(await stat(inside.real)).isFile()) return fail("base_model_path", `${path} is not a regular file`, "not_a_file");
  return { ok: true, value: inside.real };
}

async function checkOutputDir(path: string, config: Config): Promise<Field<string>> {
  const inside = await resolveInside(path, [config.handoff_root], true);
  if (!inside.ok) return fail("output_dir", inside.msg, inside.type);
  const st = await stat(inside.real).catch(() => null);
  if (st && !st.isDirectory()) return fail("output_dir", `${path} exists and is not a directory`, "not_a_directory");
  return { ok: true, value: inside.real };
}

function checkDevice(request: TrainRequest, config: Config): Field<Device> {
  const device = config.devices.find((d) => d.index === request.device_index);
  const known = config.devices.map((d) => `${d.index} (${d.name}, ${d.class})`).join(", ");
  if (!device) return fail("device_index", `no configured device ${request.device_index}; configured: ${known}`, "unknown_device");
  const allowed = TIERS[request.tier].deviceClasses;
  if (!allowed.includes(device.class)) {
    const usable = config.devices.filter((d) => allowed.includes(d.class)).map((d) => d.index);
    return fail("device_index", `tier "${request.tier}" needs a ${allowed.join(" or ")} device; device ${device.index} is ${device.name} (${device.class}); usable: ${usable.join(", ") || "none configured"}`, "tier_device_mismatch");
  }
  return { ok: true, value: device };
}

function fail<T>(field: string, msg: string, type: string): Field<T> {
  return { ok: false, error: fieldError(field, msg, type) };
}

async function exists(path: string): Promise<boolean> {
  return (await stat(path).catch(() => null)) !== null;
}
