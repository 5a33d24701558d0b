import { describe, expect, setDefaultTimeout, test } from "bun:test";
import { readdirSync, truncateSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { ConfigSchema, type Config } from "../../src/config/schema.ts";
import { checkTrain } from "../../src/request/check.ts";
import { inProcessApp } from "../support/app-harness.ts";
import { CHECKPOINT_KEYS, checkpointBytes, writeCheckpoint } from "../support/checkpoints.ts";
import { makeHostTree, type HostTree } from "../support/host-tree.ts";
import { pathsNotSent, snapshotFiles, spawnEvidence } from "../support/leftovers.ts";
import { realModeConfig, TRAINERS } from "../support/real-mode.ts";

// The HTTP cases start a real (fixture) trainer for the accepted contrast.
setDefaultTimeout(30_000);

const NEEDED =
  "base_model_path must be one original-format SDXL checkpoint with model.diffusion_model., conditioner.embedders.0.transformer., conditioner.embedders.1.model. and first_stage_model. keys";

function configFor(tree: HostTree): Config {
  return ConfigSchema.parse({ state_dir: tree.state, handoff_root: tree.handoff, model_roots: [tree.models], trainer: { mode: "simulate" } });
}

// The base model's 422 items, asserting on the way that the refusal created nothing and named no unsent path.
async function baseModelRefusal(tree: HostTree, model: string) {
  const before = snapshotFiles(tree);
  const body = tree.validRequest({ base_model_path: model });
  const result = await checkTrain(body, configFor(tree));
  if (result.ok || result.error.kind !== "invalid") throw new Error(`expected a 422, got ${JSON.stringify(result)}`);
  expect(snapshotFiles(tree)).toEqual(before);
  for (const item of result.error.detail) expect(pathsNotSent(item.msg, JSON.stringify(body))).toEqual([]);
  return result.error.detail;
}

function lengthPrefixed(header: string, data: Uint8Array): Buffer {
  const json = Buffer.from(header);
  const prefix = Buffer.alloc(8);
  prefix.writeBigUInt64LE(BigInt(json.byteLength));
  return Buffer.concat([prefix, json, data]);
}

describe("a base model that is not an SDXL checkpoint is refused at POST /train", () => {
  const kinds: Array<[string, keyof typeof CHECKPOINT_KEYS, string]> = [
    ["an SD 1.5 checkpoint", "sd15", "is an SD 1.x checkpoint: cond_stage_model.transformer. keys, no conditioner."],
    ["an SD 2.1 checkpoint", "sd21", "is an SD 2.x checkpoint: cond_stage_model.model. keys, no conditioner."],
    ["the SDXL refiner", "sdxlRefiner", "is an SDXL refiner checkpoint: conditioner.embedders.0.model. keys (OpenCLIP bigG alone), no conditioner.embedders.0.transformer. (CLIP-L)"],
    ["a LoRA", "lora", "is a LoRA, not a checkpoint: lora_unet_ and lora_te keys"],
    ["a FLUX model", "flux", "is a FLUX model: double_blocks. keys, no conditioner."],
    ["a diffusers-format U-Net", "diffusersUnet", "is a diffusers-format file: down_blocks., mid_block. and up_blocks. keys, no model.diffusion_model. or first_stage_model."],
    ["a VAE on its own", "vae", "is a VAE on its own: encoder. and decoder. keys, no model.diffusion_model."],
    ["an original-format U-Net on its own", "unetOnly", "is a U-Net on its own: model.diffusion_model. keys, no conditioner. or first_stage_model."],
    ["an SDXL checkpoint without its VAE", "sdxlWithoutVae", "is not an SDXL checkpoint: no first_stage_model. (VAE)"],
    [
      "an SDXL checkpoint without its text encoders",
      "sdxlWithoutTextEncoders",
      "is not an SDXL checkpoint: no conditioner.embedders.0.transformer. (CLIP-L text encoder), no conditioner.embedders.1.model. (OpenCLIP bigG text encoder)",
    ],
  ];
  for (const [name, keys, found] of kinds) {
    test(`${name} is a 422 on base_model_path saying what it is`, async () => {
      using tree = makeHostTree();
      const model = writeCheckpoint(join(tree.models, `${keys}.safetensors`), CHECKPOINT_KEYS[keys]);
      expect(await baseModelRefusal(tree, model)).toEqual([{ loc: ["body", "base_model_path"], msg: `${model} ${found}; ${NEEDED}`, type: "not_sdxl_checkpoint" }]);
    });
  }

  test("the SDXL checkpoint with the same fixture layout is accepted (the contrast)", async () => {
    using tree = makeHostTree();
    const model = writeCheckpoint(join(tree.models, "other-sdxl.safetensors"), CHECKPOINT_KEYS.sdxl);
    const result = await checkTrain(tree.validRequest({ base_model_path: model }), configFor(tree));
    expect(result.ok && result.value.baseModel).toBe(model);
  });

  test("a full-size SDXL checkpoint (6.9 GB, sparse here) is accepted: offsets past 4 GiB tile the file", async () => {
    using tree = makeHostTree();
    const tensorBytes = 630_000_000;
    const entries = CHECKPOINT_KEYS.sdxl.map((name, i) => [name, { dtype: "F16", shape: [tensorBytes / 2], data_offsets: [i * tensorBytes, (i + 1) * tensorBytes] }]);
    const model = join(tree.models, "sdxl-full.safetensors");
    const header = JSON.stringify(Object.fromEntries(entries));
    writeFileSync(model, lengthPrefixed(header, new Uint8Array()));
    truncateSync(model, 8 + Buffer.byteLength(header) + entries.length * tensorBytes);
    const result = await checkTrain(tree.validRequest({ base_model_path: model }), configFor(tree));
    expect(result.ok && result.value.baseModel).toBe(model);
  });
});

describe("a base model whose safetensors header is broken is refused at POST /train", () => {
  const sdxl = checkpointBytes(CHECKPOINT_KEYS.sdxl);
  const dataBytes = 4 * CHECKPOINT_KEYS.sdxl.length; // one F16 [2] tensor per key
  const broken: Array<[string, (tree: HostTree) => Uint8Array, (size: number) => string]> = [
    ["a checkpoint cut one byte short", () => sdxl.subarray(0, sdxl.byteLength - 1), () => `tensors end at data byte ${dataBytes} but the data area holds only ${dataBytes - 1} bytes`],
    ["a checkpoint with a byte appended", () => Buffer.concat([sdxl, Buffer.from([0])]), () => `data area holds 1 bytes after the last tensor ends at ${dataBytes}`],
    ["a checkpoint cut inside its header", () => sdxl.subarray(0, 100), (size) => `header length ${sdxl.readBigUInt64LE(0)} exceeds file size ${size}`],
    ["a file shorter than the length prefix", () => sdxl.subarray(0, 5), () => "file is 5 bytes, shorter than the 8-byte header length"],
    ["a header that is not JSON", () => lengthPrefixed("{model.diffusion_model.", new Uint8Array()), () => "header is not valid JSON"],
    [
      "tensors with a gap between them",
      () => lengthPrefixed(JSON.stringify({ a: { dtype: "F16", shape: [1], data_offsets: [0, 2] }, b: { dtype: "F16", shape: [1], data_offsets: [4, 6] } }), new Uint8Array(6)),
      () => "data bytes 2..4 before tensor 'b' belong to no tensor",
    ],
  ];
  for (const [name, bytes, detail] of broken) {
    test(`${name} is a 422 on base_model_path with what is wrong`, async () => {
      using tree = makeHostTree();
      const model = join(tree.models, "broken.safetensors");
      const content = bytes(tree);
      writeFileSync(model, content);
      const msg = `${model} is not a complete safetensors file: ${detail(content.byteLength)}`;
      expect(await baseModelRefusal(tree, model)).toEqual([{ loc: ["body", "base_model_path"], msg, type: "safetensors_invalid" }]);
    });
  }

  test("the intact checkpoint the broken ones were cut from is accepted (the contrast)", async () => {
    using tree = makeHostTree();
    const model = join(tree.models, "intact.safetensors");
    writeFileSync(model, sdxl);
    expect((await checkTrain(tree.validRequest({ base_model_path: model }), configFor(tree))).ok).toBe(true);
  });

  test("a base model refusal comes with the other fields' refusals, in one 422", async () => {
    using tree = makeHostTree();
    const model = writeCheckpoint(join(tree.models, "v1-5.safetensors"), CHECKPOINT_KEYS.sd15);
    const result = await checkTrain(tree.validRequest({ base_model_path: model, output_dir: "/tmp/elsewhere" }), configFor(tree));
    expect(!result.ok && result.error.kind === "invalid" && result.error.detail.map((d) => [d.loc[1], d.type])).toEqual([
      ["base_model_path", "not_sdxl_checkpoint"],
      ["output_dir", "path_outside_root"],
    ]);
  });
});

describe("over HTTP", () => {
  function appFor(tree: HostTree) {
    const trainer = join(TRAINERS, "exit-zero-without-file.sh");
    return inProcessApp(tree, realModeConfig(tree, trainer), [trainer]);
  }

  test("an SD 1.5 base model answers 422 in arbo's shape, with no job row, no job dir and no trainer process", async () => {
    using tree = makeHostTree();
    await using a = appFor(tree);
    const model = writeCheckpoint(join(tree.models, "v1-5-pruned.safetensors"), CHECKPOINT_KEYS.sd15);
    const res = await a.post(JSON.stringify(tree.validRequest({ base_model_path: model })));
    expect([res.status, await res.json()]).toEqual([
      422,
      { detail: [{ loc: ["body", "base_model_path"], msg: `${model} is an SD 1.x checkpoint: cond_stage_model.transformer. keys, no conditioner.; ${NEEDED}`, type: "not_sdxl_checkpoint" }] },
    ]);
    expect(spawnEvidence(tree, process.pid)).toEqual({ jobRows: 0, jobDirs: [], processes: [] });
    expect(readdirSync(tree.state).filter((name) => !name.startsWith("jobs.db"))).toEqual([]);
  });

  test("the same request naming the SDXL checkpoint is dispatched (the contrast: a row and a job dir appear)", async () => {
    using tree = makeHostTree();
    await using a = appFor(tree);
    const res = await a.post(JSON.stringify(tree.validRequest()));
    const body = (await res.json()) as { worker_job_id: string };
    expect(res.status).toBe(200);
    await a.supervisor.untilIdle();
    expect(spawnEvidence(tree, process.pid)).toEqual({ jobRows: 1, jobDirs: [body.worker_job_id], processes: [] });
  });
});
