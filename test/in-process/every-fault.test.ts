import { describe, expect, setDefaultTimeout, test } from "bun:test";
import { Database } from "bun:sqlite";
import { mkdirSync, readdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { inProcessApp } from "../support/app-harness.ts";
import { makeHostTree, type HostTree } from "../support/host-tree.ts";
import { snapshotFiles } from "../support/leftovers.ts";
import { SIMULATOR, simulateModeConfig } from "../support/real-mode.ts";

setDefaultTimeout(30_000);

type App = ReturnType<typeof inProcessApp>;

function appFor(tree: HostTree): App {
  return inProcessApp(tree, simulateModeConfig(tree, { seconds_per_step: 0 }), SIMULATOR);
}

async function send(a: App, text: string, key?: string) {
  const headers = { "content-type": "application/json", ...(key === undefined ? {} : { "idempotency-key": key }) };
  const res = await a.app.request("/train", { method: "POST", headers, body: text });
  return { status: res.status, body: (await res.json()) as any };
}

function jobRows(tree: HostTree): number {
  using db = new Database(join(tree.state, "jobs.db"), { readonly: true });
  return db.query<{ n: number }, []>("SELECT count(*) AS n FROM jobs").get()!.n;
}

// Ten faults of every kind: two only the text shows (10.0, a repeated key), shape faults, paths outside their
// roots, the tier on a device that cannot run it, and a field no schema knows.
function tenFaults(tree: HostTree): string {
  const body = tree.validRequest({
    dataset_dir: "/tmp",
    base_model_path: "/etc/passwd.safetensors",
    output_dir: "job1/out",
    output_name: "a/b",
    trigger: "--network_module=evil",
    subject_class: "Person",
    tier: "quality",
    network_module: "x",
  });
  return JSON.stringify(body)
    .replace('"repeats":2', '"repeats":10.0')
    .replace('"seed":42', '"seed":42,"seed":43');
}

const item = (field: string, type: string) => ({ loc: ["body", field], msg: expect.any(String), type });

describe("every fault of a request in one 422", () => {
  test("a body with ten faults of shape and meaning gets all ten in one answer, one item per field, and nothing is made", async () => {
    using tree = makeHostTree();
    await using a = appFor(tree);
    const before = snapshotFiles(tree);
    const { status, body } = await send(a, tenFaults(tree), "a b");
    expect(status).toBe(422);
    expect(body.detail).toEqual([
      item("dataset_dir", "path_outside_root"),
      item("base_model_path", "path_outside_root"),
      item("output_dir", "path_not_absolute"),
      item("output_name", "pattern_mismatch"),
      item("trigger", "pattern_mismatch"),
      item("subject_class", "pattern_mismatch"),
      { loc: ["body", "repeats"], msg: "must be an integer, got the number literal 10.0", type: "type_error" },
      item("device_index", "tier_device_mismatch"),
      { loc: ["body", "seed"], msg: "appears more than once in the object; each key may appear once", type: "duplicate_key" },
      item("network_module", "extra_forbidden"),
      { loc: ["header", "Idempotency-Key"], msg: "must be 1-255 printable ASCII characters without spaces", type: "value_error" },
    ]);
    expect(jobRows(tree)).toBe(0);
    expect(readdirSync(tree.state).filter((name) => !name.startsWith("jobs.db"))).toEqual([]);
    expect(snapshotFiles(tree)).toEqual(before);
  });

  test("fixing exactly the fields the 422 named makes the request pass: it named every one", async () => {
    using tree = makeHostTree();
    await using a = appFor(tree);
    const { body } = await send(a, tenFaults(tree));
    const named = new Set(body.detail.map((d: any) => d.loc[1]));
    // The fix an integrator makes from the answer: each named field as the form should have sent it, or gone.
    const valid = tree.validRequest({ device_index: 1 });
    const fixed = Object.fromEntries(
      Object.entries(JSON.parse(tenFaults(tree))).flatMap(([field, value]) =>
        !named.has(field) ? [[field, value]] : field in valid ? [[field, valid[field]]] : []),
    );
    expect(await send(a, JSON.stringify(fixed))).toMatchObject({ status: 200, body: { status: "starting" } });
  });

  test("every number written as a fraction and every repeated key the text shows is named, not only the first", async () => {
    using tree = makeHostTree();
    await using a = appFor(tree);
    const text = JSON.stringify(tree.validRequest())
      .replace('"repeats":2', '"repeats":2.0').replace('"seed":42', '"seed":4.2e1').replace('"trigger":"ohwx"', '"trigger":"ohwx","trigger":"x"')
      .replace('"tier":"fast"', '"tier":"fast","tier":"fast"');
    const { status, body } = await send(a, text);
    expect([status, body.detail.map((d: any) => [d.loc[1], d.type, d.msg])]).toEqual([422, [
      ["trigger", "duplicate_key", "appears more than once in the object; each key may appear once"],
      ["repeats", "type_error", "must be an integer, got the number literal 2.0"],
      ["tier", "duplicate_key", "appears more than once in the object; each key may appear once"],
      ["seed", "type_error", "must be an integer, got the number literal 4.2e1"],
    ]]);
  });

  test("contrast: fixing all but one named field is answered with exactly that one", async () => {
    using tree = makeHostTree();
    await using a = appFor(tree);
    const { status, body } = await send(a, JSON.stringify(tree.validRequest({ tier: "quality" })));
    expect([status, body.detail]).toEqual([422, [item("device_index", "tier_device_mismatch")]]);
  });

  test("the dataset's own checks, an unknown device and a bad tier come together", async () => {
    using tree = makeHostTree();
    await using a = appFor(tree);
    mkdirSync(join(tree.handoff, "empty"));
    const request = tree.validRequest({ dataset_dir: join(tree.handoff, "empty"), tier: "ultra", device_index: 7, seed: -1 });
    const { status, body } = await send(a, JSON.stringify(request));
    expect([status, body.detail]).toEqual([422, [
      item("dataset_dir", "dataset_empty"),
      item("tier", "enum"),
      { loc: ["body", "device_index"], msg: expect.stringMatching(/^no configured device 7; configured: /), type: "unknown_device" },
      item("seed", "too_small"),
    ]]);
  });

  test("a check that needs another field runs only once that field is right: no item about what was not meant", async () => {
    using tree = makeHostTree();
    await using a = appFor(tree);
    // quality on device 0 is refused only for a tier the request really names; a dataset is scanned only at a valid path.
    const request = tree.validRequest({ dataset_dir: `${tree.handoff}/job1/../job1/dataset`, tier: "ultra" });
    const { status, body } = await send(a, JSON.stringify(request));
    expect([status, body.detail]).toEqual([422, [item("dataset_dir", "path_not_normalized"), item("tier", "enum")]]);
    // Contrast: the same device with a real tier that needs the 48 GB card is refused on device_index.
    const quality = await send(a, JSON.stringify(tree.validRequest({ dataset_dir: request.dataset_dir, tier: "quality" })));
    expect(quality.body.detail).toEqual([item("dataset_dir", "path_not_normalized"), item("device_index", "tier_device_mismatch")]);
  });

  test("a file of the dataset over its bound comes with the other fields' faults", async () => {
    using tree = makeHostTree();
    writeFileSync(join(tree.dataset, "big.png"), new Uint8Array(2 * 1024 * 1024));
    const config = simulateModeConfig(tree, { seconds_per_step: 0 });
    await using bounded = inProcessApp(tree, { ...config, dataset: { ...config.dataset, max_file_bytes: 1024 * 1024 } }, SIMULATOR);
    const { status, body } = await send(bounded, JSON.stringify(tree.validRequest({ output_name: ".hidden" })));
    expect([status, body.detail]).toEqual([422, [
      { loc: ["body", "dataset_dir"], msg: `${tree.dataset} big.png is 2097152 bytes; dataset.max_file_bytes allows 1048576`, type: "dataset_file_too_large" },
      item("output_name", "pattern_mismatch"),
    ]]);
  });

  test("an Idempotency-Key used with another body is answered with the new body's own faults, in one 422", async () => {
    using tree = makeHostTree();
    await using a = appFor(tree);
    expect((await send(a, JSON.stringify(tree.validRequest()), "k-1")).status).toBe(200);
    await a.supervisor.untilIdle();
    const reused = { loc: ["header", "Idempotency-Key"], msg: "this Idempotency-Key was already used with a different request body", type: "idempotency_mismatch" };
    const faulty = await send(a, JSON.stringify(tree.validRequest({ repeats: 0, device_index: 9 })), "k-1");
    expect([faulty.status, faulty.body.detail]).toEqual([422, [item("repeats", "too_small"), item("device_index", "unknown_device"), reused]]);
    const meaning = await send(a, JSON.stringify(tree.validRequest({ seed: 7, dataset_dir: "/tmp" })), "k-1");
    expect([meaning.status, meaning.body.detail]).toEqual([422, [item("dataset_dir", "path_outside_root"), reused]]);
    // Contrast: the same body with the same key is the same job, not a fault.
    expect((await send(a, JSON.stringify(tree.validRequest()), "k-1")).status).toBe(200);
    expect(jobRows(tree)).toBe(1);
  });

  test("a resume's body faults, a bad or reused Idempotency-Key among them, come in one 422", async () => {
    using tree = makeHostTree();
    await using a = appFor(tree);
    const id = (await send(a, JSON.stringify(tree.validRequest()), "k-2")).body.worker_job_id;
    await a.supervisor.untilIdle();
    const resume = async (text: string, key: string) => {
      const headers = { "content-type": "application/json", "idempotency-key": key };
      const res = await a.app.request(`/train/${id}/resume`, { method: "POST", headers, body: text });
      return { status: res.status, body: (await res.json()) as any };
    };
    const samples = { loc: ["body", "samples"], msg: "must be an integer, got the number literal 1.0", type: "type_error" };
    expect(await resume('{"samples":1.0,"tier":"fast"}', "k-2")).toEqual({ status: 422, body: { detail: [
      samples,
      item("tier", "extra_forbidden"),
      { loc: ["header", "Idempotency-Key"], msg: "this Idempotency-Key was already used for another request", type: "idempotency_mismatch" },
    ] } });
    expect(await resume('{"samples":1.0}', "a b")).toEqual({ status: 422, body: { detail: [
      samples,
      { loc: ["header", "Idempotency-Key"], msg: "must be 1-255 printable ASCII characters without spaces", type: "value_error" },
    ] } });
    // Contrast: a key no job holds is no fault; the body's own are all that is said.
    expect(await resume('{"samples":1.0}', "k-new")).toEqual({ status: 422, body: { detail: [samples] } });
    expect(jobRows(tree)).toBe(1);
  });

  test("a body of 6,000 unknown keys is answered with its first 100 faults and a count of the rest, and nothing is made", async () => {
    using tree = makeHostTree();
    await using a = appFor(tree);
    const before = snapshotFiles(tree);
    const unknown = (n: number) => Object.fromEntries(Array.from({ length: n }, (_, i) => [`k${i}`, 1]));
    const body = { ...tree.validRequest({ tier: "fastest" }), ...unknown(6000) };
    const { status, body: answer } = await send(a, JSON.stringify(body));
    expect(status).toBe(422);
    expect(answer.detail).toHaveLength(101);
    // The known field's fault leads, then the unknown keys in the body's order, then the count.
    expect(answer.detail[0]).toEqual(item("tier", "enum"));
    expect(answer.detail.slice(1, 100).map((d: any) => d.loc[1])).toEqual(Array.from({ length: 99 }, (_, i) => `k${i}`));
    expect(answer.detail[100]).toEqual({
      loc: ["body"],
      msg: "and 5901 more faults not listed; a 422 lists the first 100",
      type: "too_many_faults",
    });
    expect(JSON.stringify(answer).length).toBeLessThan(16_000);
    expect(snapshotFiles(tree)).toEqual(before);
    expect(jobRows(tree)).toBe(0);
    // Contrast: 99 faults are listed whole, with no count.
    const listed = await send(a, JSON.stringify({ ...tree.validRequest(), ...unknown(99) }));
    expect(listed.body.detail).toHaveLength(99);
    expect(listed.body.detail.every((d: any) => d.type === "extra_forbidden")).toBe(true);
  });
});
