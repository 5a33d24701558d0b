import { describe, expect, test } from "bun:test";
import { mkdirSync, readdirSync, renameSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { ConfigSchema, type Config } from "../../src/config/schema.ts";
import { checkTrain } from "../../src/request/check.ts";
import type { DetailType } from "../../src/request/detail-types.ts";
import { recheckPaths } from "../../src/request/check.ts";
import { makeHostTree, type HostTree } from "../support/host-tree.ts";

function configFor(tree: HostTree): Config {
  return ConfigSchema.parse({ state_dir: tree.state, handoff_root: tree.handoff, model_roots: [tree.models], trainer: { mode: "simulate" } });
}

async function locsOf(tree: HostTree, overrides: Record<string, unknown>) {
  const result = await checkTrain(tree.validRequest(overrides), configFor(tree));
  if (result.ok || result.error.kind !== "invalid") throw new Error(`expected a 422, got ${JSON.stringify(result)}`);
  return result.error.detail;
}

describe("POST /train validation (INV-T7)", () => {
  test("a valid request resolves its paths and picks the dataset dir", async () => {
    using tree = makeHostTree();
    const result = await checkTrain(tree.validRequest(), configFor(tree));
    if (!result.ok) throw new Error(JSON.stringify(result));
    expect(result.value.datasetDir).toBe(tree.dataset);
    const bytes = result.value.dataset.files.reduce((sum, f) => sum + f.size, 0);
    expect(result.value.dataset).toMatchObject({ folder: null, bytes });
    expect(bytes).toBeGreaterThan(3 * 8);
    expect(result.value.dataset.files.map((f) => f.rel)).toEqual(["img0.png", "img1.png", "img2.png"]);
    expect(result.value.outputFile).toBe(join(tree.handoff, "job1", "out", "mylora.safetensors"));
  });

  test("images inside one kohya folder are found there", async () => {
    using tree = makeHostTree(0);
    const kohya = join(tree.dataset, "10_ohwx person");
    mkdirSync(kohya);
    writeFileSync(join(kohya, "a.JPG"), "x");
    const result = await checkTrain(tree.validRequest(), configFor(tree));
    expect(result.ok && result.value.dataset.folder).toBe("10_ohwx person");
    expect(result.ok && result.value.dataset.files.map((f) => f.rel)).toEqual(["10_ohwx person/a.JPG"]);
  });

  const cases: Array<[string, (t: HostTree) => Record<string, unknown>, string, DetailType]> = [
    ["a dataset outside the handoff root", () => ({ dataset_dir: "/tmp" }), "dataset_dir", "path_outside_root"],
    ["a sibling dir sharing the root's prefix", (t) => { mkdirSync(`${t.handoff}-evil`); writeFileSync(`${t.handoff}-evil/a.png`, "x"); return { dataset_dir: `${t.handoff}-evil` }; }, "dataset_dir", "path_outside_root"],
    ["a symlink inside the root pointing out", (t) => { symlinkSync(t.models, join(t.handoff, "link")); return { dataset_dir: join(t.handoff, "link") }; }, "dataset_dir", "path_outside_root"],
    ["a dotdot escape", (t) => ({ output_dir: `${t.handoff}/../models` }), "output_dir", "path_not_normalized"],
    ["a dotdot that stays inside", (t) => ({ dataset_dir: `${t.handoff}/job1/../job1/dataset` }), "dataset_dir", "path_not_normalized"],
    ["a dangling link where the output dir would be created", (t) => { symlinkSync(join(t.root, "nowhere", "out"), join(t.handoff, "dangling")); return { output_dir: join(t.handoff, "dangling", "out") }; }, "output_dir", "path_dangling_link"],
    ["the handoff root itself", (t) => ({ output_dir: t.handoff }), "output_dir", "path_outside_root"],
    ["a relative path", () => ({ dataset_dir: "job1/dataset" }), "dataset_dir", "path_not_absolute"],
    ["a dataset with no image", (t) => { mkdirSync(join(t.handoff, "empty")); return { dataset_dir: join(t.handoff, "empty") }; }, "dataset_dir", "dataset_empty"],
    // sd-scripts globs "*.png" and "*.PNG": a mixed-case or hidden image is none to it, and its run ends "No data found."
    ["a dataset whose only images are a.Png and .b.png", (t) => { mkdirSync(join(t.handoff, "odd")); writeFileSync(join(t.handoff, "odd", "a.Png"), "x"); writeFileSync(join(t.handoff, "odd", ".b.png"), "x"); return { dataset_dir: join(t.handoff, "odd") }; }, "dataset_dir", "dataset_empty"],
    ["a missing dataset", (t) => ({ dataset_dir: join(t.handoff, "nope") }), "dataset_dir", "path_not_found"],
    ["a base model that is a .ckpt", (t) => ({ base_model_path: join(t.models, "m.ckpt") }), "base_model_path", "not_safetensors"],
    ["a missing base model", (t) => ({ base_model_path: join(t.models, "nope.safetensors") }), "base_model_path", "path_not_found"],
    ["a base model outside the model roots", (t) => ({ base_model_path: join(t.handoff, "x.safetensors") }), "base_model_path", "path_outside_root"],
    ["a .safetensors link to a .ckpt", (t) => { writeFileSync(join(t.models, "m.ckpt"), "pickle"); symlinkSync(join(t.models, "m.ckpt"), join(t.models, "m.safetensors")); return { base_model_path: join(t.models, "m.safetensors") }; }, "base_model_path", "not_safetensors"],
    ["an output_name with a slash", () => ({ output_name: "a/b" }), "output_name", "pattern_mismatch"],
    ["an option-looking trigger", () => ({ trigger: "--network_module=evil" }), "trigger", "pattern_mismatch"],
    ["a subject class with a newline", () => ({ subject_class: "person\n[[datasets]]" }), "subject_class", "pattern_mismatch"],
    ["repeats as a string", () => ({ repeats: "10" }), "repeats", "type_error"],
    ["repeats over 100", () => ({ repeats: 101 }), "repeats", "too_big"],
    ["a float seed", () => ({ seed: 1.5 }), "seed", "type_error"],
    ["a seed beyond 2^32-1", () => ({ seed: 2 ** 32 }), "seed", "too_big"],
    ["an unknown tier", () => ({ tier: "ultra" }), "tier", "enum"],
    ["quality on the 24 GB card", () => ({ tier: "quality", device_index: 0 }), "device_index", "tier_device_mismatch"],
    ["an unconfigured device", () => ({ device_index: 7 }), "device_index", "unknown_device"],
    ["an unknown field", () => ({ network_module: "x" }), "network_module", "extra_forbidden"],
    ["a NUL byte in a path", (t) => ({ dataset_dir: `${t.dataset}\u0000x` }), "dataset_dir", "path_control_character"],
  ];

  for (const [name, overrides, field, type] of cases) {
    test(`${name} is a 422 on ${field} and creates nothing`, async () => {
      using tree = makeHostTree();
      const before = readdirSync(join(tree.handoff, "job1"));
      const detail = await locsOf(tree, overrides(tree));
      expect(detail).toContainEqual({ loc: ["body", field], msg: expect.any(String), type });
      expect(readdirSync(join(tree.handoff, "job1"))).toEqual(before);
      expect(readdirSync(tree.state)).toEqual([]);
    });
  }

  test("quality on the 48 GB card passes: the tier rule is not a blanket refusal", async () => {
    using tree = makeHostTree();
    const result = await checkTrain(tree.validRequest({ tier: "quality", device_index: 1 }), configFor(tree));
    expect(result.ok).toBe(true);
  });

  test("a field missing entirely is reported as missing", async () => {
    using tree = makeHostTree();
    const { seed: _, ...body } = tree.validRequest();
    const result = await checkTrain(body, configFor(tree));
    expect(result).toEqual({
      ok: false,
      error: { kind: "invalid", detail: [{ loc: ["body", "seed"], msg: "field required", type: "missing" }] },
    });
  });

  test("a dangling link named like the output file is refused as output_exists", async () => {
    using tree = makeHostTree();
    mkdirSync(join(tree.handoff, "job1", "out"));
    symlinkSync(join(tree.root, "elsewhere.safetensors"), join(tree.handoff, "job1", "out", "mylora.safetensors"));
    const result = await checkTrain(tree.validRequest(), configFor(tree));
    expect(result).toMatchObject({ ok: false, error: { kind: "output_exists" } });
  });

  test("a refusal never names a host path the caller did not send", async () => {
    using tree = makeHostTree();
    symlinkSync(tree.models, join(tree.handoff, "link"));
    const detail = await locsOf(tree, { dataset_dir: join(tree.handoff, "link"), base_model_path: "/etc/passwd.safetensors" });
    expect(detail).toEqual([
      { loc: ["body", "dataset_dir"], msg: `${join(tree.handoff, "link")} leads out of the handoff root through a symbolic link`, type: "path_outside_root" },
      { loc: ["body", "base_model_path"], msg: "/etc/passwd.safetensors is not inside a configured model root", type: "path_outside_root" },
    ]);
    expect(JSON.stringify(detail)).not.toContain(tree.models);
  });

  test("a dataset swapped for a link after the check is caught by the spawn-time recheck; an untouched one passes", async () => {
    using tree = makeHostTree();
    const config = configFor(tree);
    const result = await checkTrain(tree.validRequest(), config);
    if (!result.ok) throw new Error(JSON.stringify(result));
    expect(recheckPaths(result.value, config)).toEqual([]);
    renameSync(tree.dataset, join(tree.handoff, "job1", "moved"));
    mkdirSync(join(tree.root, "elsewhere"));
    symlinkSync(join(tree.root, "elsewhere"), tree.dataset);
    expect(recheckPaths(result.value, config)).toEqual([
      { loc: ["body", "dataset_dir"], msg: `${tree.dataset} changed on disk after it was checked; send the request again`, type: "path_changed" },
    ]);
  });

  test("an existing <output_name>.safetensors is refused as output_exists", async () => {
    using tree = makeHostTree();
    mkdirSync(join(tree.handoff, "job1", "out"));
    writeFileSync(join(tree.handoff, "job1", "out", "mylora.safetensors"), "x");
    const result = await checkTrain(tree.validRequest(), configFor(tree));
    expect(result).toMatchObject({ ok: false, error: { kind: "output_exists" } });
  });
});
