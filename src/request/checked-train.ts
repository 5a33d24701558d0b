import { join } from "node:path";
import { hasEntry, statOrNull } from "../fs.ts";
import type { Config, Device } from "../config/schema.ts";
import { TIERS } from "../tiers.ts";
import { checkBaseModelHeader } from "./base-model.ts";
import { resolveInside, type Roots } from "./contained-path.ts";
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

const SAFETENSORS = ".safetensors";
const NOT_SAFETENSORS = "must name a .safetensors file (other formats can run code on load)";

type Field<T> = { ok: true; value: T } | { ok: false; error: DetailItem };

export async function checkTrain(body: unknown, config: Config): Promise<CheckResult> {
  const parsed = TrainRequest.safeParse(body);
  if (!parsed.success) return { ok: false, kind: "invalid", detail: detailFromIssues(parsed.error.issues, body) };
  const request = parsed.data;
  const [dataset, model, output, device] = await Promise.all([
    checkDataset(request.dataset_dir, config),
    checkBaseModel(request.base_model_path, config),
    checkOutputDir(request.output_dir, config),
    checkDevice(request, config),
  ]);
  const errors = [dataset, model, output, device].flatMap((f) => (f.ok ? [] : [f.error]));
  if (!dataset.ok || !model.ok || !output.ok || !device.ok) return { ok: false, kind: "invalid", detail: errors };
  const outputFile = join(output.value, `${request.output_name}.safetensors`);
  // lstat: a dangling link named like the output would have the trainer write wherever it points.
  if (hasEntry(outputFile)) {
    return { ok: false, kind: "output_exists", detail: `output_dir already holds ${request.output_name}.safetensors; choose another output_name or remove the file` };
  }
  return {
    ok: true,
    value: { request, device: device.value, imageDir: dataset.value.dir, imageCount: dataset.value.count, baseModel: model.value, outputDir: output.value, outputFile },
  };
}

export const handoffRoot = (config: Config): Roots => ({ paths: [config.handoff_root], label: "the handoff root" });
export const modelRoots = (config: Config): Roots => ({ paths: config.model_roots, label: "a configured model root" });

async function checkDataset(path: string, config: Config): Promise<Field<{ dir: string; count: number }>> {
  const inside = resolveInside(path, handoffRoot(config), false);
  if (!inside.ok) return fail("dataset_dir", inside.msg, inside.type);
  if (!statOrNull(inside.real)?.isDirectory()) return fail("dataset_dir", `${path} is not a directory`, "not_a_directory");
  const images = await findImageDir(inside.real);
  return images.ok ? { ok: true, value: images } : fail("dataset_dir", `${path} ${images.msg}`, images.type);
}

async function checkBaseModel(path: string, config: Config): Promise<Field<string>> {
  if (!path.endsWith(SAFETENSORS)) return fail("base_model_path", NOT_SAFETENSORS, "not_safetensors");
  const inside = resolveInside(path, modelRoots(config), false);
  if (!inside.ok) return fail("base_model_path", inside.msg, inside.type);
  if (!inside.real.endsWith(SAFETENSORS)) return fail("base_model_path", `${path} is a link to a file that is not .safetensors; ${NOT_SAFETENSORS}`, "not_safetensors");
  const st = statOrNull(inside.real);
  if (!st?.isFile()) return fail("base_model_path", `${path} is not a regular file`, "not_a_file");
  const header = await checkBaseModelHeader(path, inside.real, st.size);
  return header.ok ? { ok: true, value: inside.real } : fail("base_model_path", header.msg, header.type);
}

function checkOutputDir(path: string, config: Config): Field<string> {
  const inside = resolveInside(path, handoffRoot(config), true);
  if (!inside.ok) return fail("output_dir", inside.msg, inside.type);
  const st = statOrNull(inside.real);
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

