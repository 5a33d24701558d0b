import { realpathSync } from "node:fs";
import { join } from "node:path";
import { hasEntry, statOrNull } from "../fs.ts";
import type { Config, Device } from "../config/schema.ts";
import { fail, ok, type Result } from "../result.ts";
import { TIERS } from "../tiers.ts";
import { checkBaseModelHeader } from "./base-model.ts";
import { resolveInside, type Roots } from "./contained-path.ts";
import { scanDataset, type Dataset } from "./dataset.ts";
import { FIELDS, readTrain, type ReadTrain } from "./read-train.ts";
import { type DetailItem, fieldError, type JobRequest, oneEach, type Problem } from "./schema.ts";

// For the moment just before spawning: every real path the check resolved still resolves to itself inside
// its root, so a link swapped in since the request was checked is caught (time of check vs time of use).
export function recheckPaths(train: CheckedTrain, config: Config): DetailItem[] {
  const { request } = train;
  const checks: Array<[string, string, string, Roots, boolean]> = [
    ["base_model_path", request.base_model_path, train.baseModel, modelRoots(config), false],
    ["output_dir", request.output_dir, train.outputDir, handoffRoot(config), true],
  ];
  // A resume reads its predecessor's copy in the state dir, not the handoff folder.
  if (!train.resumed) checks.push(["dataset_dir", request.dataset_dir, train.datasetDir, handoffRoot(config), false]);
  return checks.flatMap(([field, sent, real, roots, allowMissing]) => {
    const again = resolveInside(real, roots, allowMissing);
    if (again.ok && again.value === real) return [];
    return [fieldError(field, `${sent} changed on disk after it was checked; send the request again`, "path_changed")];
  });
}

// A request that passed every rule, with the resolved paths the trainer will be given.
export interface CheckedTrain {
  request: JobRequest;
  device: Device;
  /** The dataset dir with symbolic links resolved. */
  datasetDir: string;
  /** Every file the trainer will read, as checked: what the job directory's copy is made from. */
  dataset: Dataset;
  baseModel: string;
  outputDir: string;
  outputFile: string;
  /** The dataset is a predecessor's copy (a resume), not arbo's folder. */
  resumed: boolean;
}

type CheckRefusal = { kind: "invalid"; detail: DetailItem[] } | { kind: "output_exists"; detail: string };

type TrainCheck = Result<CheckedTrain, CheckRefusal>;

type DatasetCheck = { datasetDir: string; dataset: Dataset };

const SAFETENSORS = ".safetensors";
const NOT_SAFETENSORS = "must name a .safetensors file (other formats can run code on load)";

type Field<T> = Result<T, DetailItem>;

/** A body as a request, or the 422 detail of every fault: each field's shape, and the meaning of the rest. */
export async function checkTrain(
  body: unknown,
  config: Config,
  faults: readonly DetailItem[] = [],
): Promise<TrainCheck> {
  const read = readTrain(body, faults);
  if (read.request !== null) return checkRequest(read.request, config);
  return fail({ kind: "invalid", detail: await everyFault(read, config) });
}

/** The shape's faults and those of the checks the fields with a right shape allow, one item per field. */
export async function everyFault(read: ReadTrain, config: Config): Promise<DetailItem[]> {
  const { fields } = read;
  const dataset = fields.dataset_dir === undefined ? null : checkDataset(fields.dataset_dir, config);
  return oneEach([...read.detail, ...faultsOf(await runChecks(fields, dataset, config))], FIELDS);
}

/** Every rule of a parsed request (from arbo, or composed by the worker: a smoke run). */
export async function checkRequest(request: JobRequest, config: Config): Promise<TrainCheck> {
  return checkWith(request, checkDataset(request.dataset_dir, config), config, false);
}

// A resume runs its predecessor's request again on the predecessor's dataset copy: every other rule still holds
// (the model, the output, the device may have changed since).
export async function checkResume(request: JobRequest, copy: DatasetCheck, config: Config): Promise<TrainCheck> {
  return checkWith(request, Promise.resolve(ok(copy)), config, true);
}

// What the filesystem and the config say of each field given; a field not given (absent, or faulty) is not checked.
interface Checks {
  dataset: Field<DatasetCheck> | null;
  model: Field<string> | null;
  output: Field<string> | null;
  device: Field<Device> | null;
}

async function runChecks(
  fields: Partial<JobRequest>,
  datasetCheck: Promise<Field<DatasetCheck>> | null,
  config: Config,
): Promise<Checks> {
  const { base_model_path: model, output_dir: output, device_index: device } = fields;
  const [dataset, modelCheck, outputCheck, deviceCheck] = await Promise.all([
    datasetCheck,
    model === undefined ? null : checkBaseModel(model, config),
    output === undefined ? null : checkOutputDir(output, config),
    device === undefined ? null : checkDevice(device, fields.tier, config),
  ]);
  return { dataset, model: modelCheck, output: outputCheck, device: deviceCheck };
}

const faultsOf = (checks: Checks): DetailItem[] =>
  Object.values(checks).flatMap((check: Field<unknown> | null) => (check === null || check.ok ? [] : [check.error]));

async function checkWith(
  request: JobRequest,
  datasetCheck: Promise<Field<DatasetCheck>>,
  config: Config,
  resumed: boolean,
): Promise<TrainCheck> {
  const checks = await runChecks(request, datasetCheck, config);
  const { dataset, model, output, device } = checks;
  if (!dataset?.ok || !model?.ok || !output?.ok || !device?.ok) {
    return fail({ kind: "invalid", detail: oneEach(faultsOf(checks), FIELDS) });
  }
  const outputFile = join(output.value, `${request.output_name}.safetensors`);
  // lstat: a dangling link named like the output would have the trainer write wherever it points.
  if (hasEntry(outputFile)) {
    const detail =
      `output_dir already holds ${request.output_name}.safetensors; ` +
      "choose another output_name or remove the file";
    return fail({ kind: "output_exists", detail });
  }
  return ok({
    request,
    device: device.value,
    ...dataset.value,
    baseModel: model.value,
    outputDir: output.value,
    outputFile,
    resumed,
  });
}

export const handoffRoot = (config: Config): Roots => ({ paths: [config.handoff_root], label: "the handoff root" });
const modelRoots = (config: Config): Roots => ({ paths: config.model_roots, label: "a configured model root" });

async function checkDataset(path: string, config: Config): Promise<Field<DatasetCheck>> {
  const inside = resolveInside(path, handoffRoot(config), false);
  if (!inside.ok) return refuse("dataset_dir", inside.error);
  const datasetDir = inside.value;
  if (!statOrNull(datasetDir)?.isDirectory()) {
    return refuse("dataset_dir", { msg: `${path} is not a directory`, type: "not_a_directory" });
  }
  const scan = await scanDataset(datasetDir, realpathSync(config.handoff_root), config.dataset);
  if (!scan.ok) return refuse("dataset_dir", { msg: `${path} ${scan.error.msg}`, type: scan.error.type });
  return ok({ datasetDir, dataset: scan.value });
}

async function checkBaseModel(path: string, config: Config): Promise<Field<string>> {
  if (!path.endsWith(SAFETENSORS)) return refuse("base_model_path", { msg: NOT_SAFETENSORS, type: "not_safetensors" });
  const inside = resolveInside(path, modelRoots(config), false);
  if (!inside.ok) return refuse("base_model_path", inside.error);
  const real = inside.value;
  if (!real.endsWith(SAFETENSORS)) {
    const msg = `${path} is a link to a file that is not .safetensors; ${NOT_SAFETENSORS}`;
    return refuse("base_model_path", { msg, type: "not_safetensors" });
  }
  const st = statOrNull(real);
  if (!st?.isFile()) return refuse("base_model_path", { msg: `${path} is not a regular file`, type: "not_a_file" });
  const header = await checkBaseModelHeader(path, real, st.size);
  return header.ok ? ok(real) : refuse("base_model_path", header.error);
}

function checkOutputDir(path: string, config: Config): Field<string> {
  const inside = resolveInside(path, handoffRoot(config), true);
  if (!inside.ok) return refuse("output_dir", inside.error);
  const st = statOrNull(inside.value);
  if (st && !st.isDirectory()) {
    return refuse("output_dir", { msg: `${path} exists and is not a directory`, type: "not_a_directory" });
  }
  return inside;
}

// The tier's device classes are asked only of a tier with a right shape; an unknown device needs no tier.
function checkDevice(index: number, tier: JobRequest["tier"] | undefined, config: Config): Field<Device> {
  const device = config.devices.find((d) => d.index === index);
  const known = config.devices.map((d) => `${d.index} (${d.name}, ${d.class})`).join(", ");
  if (!device) {
    const msg = `no configured device ${index}; configured: ${known}`;
    return refuse("device_index", { msg, type: "unknown_device" });
  }
  if (tier === undefined) return ok(device);
  const allowed = TIERS[tier].deviceClasses;
  if (!allowed.includes(device.class)) {
    const usable = config.devices.filter((d) => allowed.includes(d.class)).map((d) => d.index);
    const msg =
      `tier "${tier}" needs a ${allowed.join(" or ")} device; ` +
      `device ${device.index} is ${device.name} (${device.class}); usable: ${usable.join(", ") || "none configured"}`;
    return refuse("device_index", { msg, type: "tier_device_mismatch" });
  }
  return ok(device);
}

function refuse(field: string, problem: Problem): { ok: false; error: DetailItem } {
  return fail(fieldError(field, problem.msg, problem.type));
}
