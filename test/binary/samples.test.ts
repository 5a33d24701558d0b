import { beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { copyFileSync, readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { inflateSync } from "node:zlib";
import { ensureBinary } from "../support/binary.ts";
import { FAILING_TABLES, type HostTree, makeHostTree, SIMULATE_TABLES } from "../support/host-tree.ts";
import { startWorker } from "../support/worker-process.ts";
import { untilEnded } from "../support/jobs.ts";

// Issue 19 through the compiled binary and its simulated trainer, which takes sd-scripts' samples as real PNGs.
// A fast run with samples saves every 25 steps (40 without) and draws them at 100, 200, 300 and 400, at 768 px.
setDefaultTimeout(90_000);

let binary: string;
beforeAll(() => {
  binary = ensureBinary();
}, 120_000);

// A PNG decoded as far as its pixels: every chunk's CRC, IHDR's size, and inflated data of one filter byte and
// width x 3 bytes a row.
function decodePng(bytes: Uint8Array): { width: number; height: number; pixels: Buffer } {
  const data = Buffer.from(bytes);
  expect(data.subarray(0, 8)).toEqual(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]));
  const idat: Buffer[] = [];
  let header: Buffer | null = null;
  for (let at = 8; at < data.length; ) {
    const length = data.readUInt32BE(at);
    const typed = data.subarray(at + 4, at + 8 + length);
    expect(data.readUInt32BE(at + 8 + length)).toBe(Bun.hash.crc32(typed));
    const type = typed.subarray(0, 4).toString("latin1");
    if (type === "IHDR") header = typed.subarray(4);
    if (type === "IDAT") idat.push(typed.subarray(4));
    at += 12 + length;
  }
  const width = header!.readUInt32BE(0);
  const height = header!.readUInt32BE(4);
  expect([...header!.subarray(8, 10)]).toEqual([8, 2]); // 8-bit RGB
  const pixels = inflateSync(Buffer.concat(idat));
  expect(pixels.length).toBe(height * (1 + width * 3));
  return { width, height, pixels };
}

const launchArgv = (tree: HostTree, id: string): string[] => JSON.parse(readFileSync(join(tree.state, "jobs", id, "launch.json"), "utf8")).argv;

describe("preview samples (compiled binary, simulated trainer)", () => {
  test("a samples: 2 run lists four decodable PNGs (two templates, with and without the trigger) at four steps and serves them", async () => {
    using tree = makeHostTree();
    await using worker = await startWorker(tree.writeConfig(SIMULATE_TABLES(0.002)), { command: [binary] });
    const id = (await worker.postTrain(tree.validRequest({ samples: 2 }))).body.worker_job_id;
    const final = await untilEnded(worker, id);
    expect(final).toMatchObject({ status: "succeeded", request: { samples: 2 } });

    const steps = [100, 200, 300, 400];
    const drawn = (step: number) => [[step, 0, "portrait", "trigger"], [step, 1, "portrait", "class"], [step, 2, "full_body", "trigger"], [step, 3, "full_body", "class"]];
    expect(final.samples.map((s: any) => [s.step, s.index, s.template, s.subject])).toEqual(steps.flatMap(drawn));
    const pixelsAt = new Map<number, Buffer>();
    for (const sample of final.samples) {
      expect(sample.name).toMatch(new RegExp(`^mylora_${String(sample.step).padStart(6, "0")}_0${sample.index}_\\d{14}_${42 + Math.floor(sample.index / 2)}\\.png$`));
      expect(sample.url).toBe(`/train/${id}/samples/${sample.name}`);
      expect(sample.path).toBeUndefined();
      const res = await worker.request(sample.url);
      expect(res.status).toBe(200);
      expect(res.headers.get("content-type")).toBe("image/png");
      const bytes = new Uint8Array(await res.arrayBuffer());
      expect(bytes.length).toBe(sample.bytes);
      expect(bytes).toEqual(new Uint8Array(readFileSync(join(tree.state, "jobs", id, "run", "sample", sample.name))));
      const png = decodePng(bytes);
      expect([png.width, png.height]).toEqual([768, 768]);
      if (sample.index === 0) pixelsAt.set(sample.step, png.pixels);
    }
    // The images change with the step.
    expect(pixelsAt.get(100)!.equals(pixelsAt.get(200)!)).toBe(false);

    // The trainer was told to sample every 100 steps from the recipe's prompts file, seeded from the request.
    const argv = launchArgv(tree, id);
    const prompts = join(tree.state, "jobs", id, "sample-prompts.json");
    expect(argv.slice(-3)).toEqual(["--sample_every_n_steps=100", `--sample_prompts=${prompts}`, "--sample_sampler=euler_a"]);
    expect(JSON.parse(readFileSync(prompts, "utf8"))).toEqual([
      expect.objectContaining({ prompt: expect.stringContaining("portrait photo of ohwx person"), width: 768, height: 768, seed: 42 }),
      expect.objectContaining({ prompt: expect.stringContaining("portrait photo of person"), width: 768, height: 768, seed: 42 }),
      expect.objectContaining({ prompt: expect.stringContaining("full body photo of ohwx person"), width: 768, height: 768, seed: 43 }),
      expect.objectContaining({ prompt: expect.stringContaining("full body photo of person"), width: 768, height: 768, seed: 43 }),
    ]);
  });

  test("without samples (absent or 0) the argv has no sampling flag and is the same either way", async () => {
    using tree = makeHostTree();
    await using worker = await startWorker(tree.writeConfig(SIMULATE_TABLES(0.002)), { command: [binary] });
    const plain = (await worker.postTrain(tree.validRequest())).body.worker_job_id;
    const plainFinal = await untilEnded(worker, plain);
    expect(plainFinal.samples).toEqual([]);
    const zero = (await worker.postTrain(tree.validRequest({ samples: 0, output_name: "other" }))).body.worker_job_id;
    await untilEnded(worker, zero);
    const [a, b] = [launchArgv(tree, plain), launchArgv(tree, zero)];
    expect(a.some((arg) => arg.startsWith("--sample"))).toBe(false);
    const same = (arg: string) =>
      arg.replaceAll(zero, plain).replace("--output_name=other", "--output_name=mylora")
        .replace("--metadata_title=other", "--metadata_title=mylora");
    expect(b.map(same)).toEqual(a);
    expect(readdirSync(join(tree.state, "jobs", plain))).not.toContain("sample-prompts.json");
    expect(readdirSync(join(tree.state, "jobs", plain, "run"))).not.toContain("sample");
  });

  test("samples out of range are a 422 naming the field, and nothing starts", async () => {
    using tree = makeHostTree();
    await using worker = await startWorker(tree.writeConfig(SIMULATE_TABLES(0.002)), { command: [binary] });
    for (const samples of [5, -1, 1.5, "2"]) {
      const res = await worker.postTrain(tree.validRequest({ samples }));
      expect(res.status).toBe(422);
      expect(res.body.detail).toEqual([expect.objectContaining({ loc: ["body", "samples"] })]);
    }
    expect((await worker.json("/train")).body.jobs).toEqual([]);
  });

  test("only a sample the record lists is served: other names, .., %2F and absolute paths are 404", async () => {
    using tree = makeHostTree();
    await using worker = await startWorker(tree.writeConfig(SIMULATE_TABLES(0.002)), { command: [binary] });
    const id = (await worker.postTrain(tree.validRequest({ samples: 1 }))).body.worker_job_id;
    const final = await untilEnded(worker, id);
    const sampleDir = join(tree.state, "jobs", id, "run", "sample");
    const listed = final.samples[0].name;
    // A whole PNG beside the listed ones that the record does not list, and the LoRA one level up.
    copyFileSync(join(sampleDir, listed), join(sampleDir, "mylora_000040_03_20260101000000_1.png"));
    const refused = [
      "mylora_000040_03_20260101000000_1.png", `..%2F${encodeURIComponent("mylora.safetensors")}`, "..", "%2E%2E",
      encodeURIComponent(join(sampleDir, listed)), `%2Fetc%2Fpasswd`, `${listed}%00`, `${listed.toUpperCase()}`,
    ];
    for (const name of refused) {
      const res = await worker.request(`/train/${id}/samples/${name}`);
      expect([name, res.status]).toEqual([name, 404]);
      expect(res.headers.get("content-type")).not.toBe("image/png");
    }
    expect((await worker.request(`/train/${id}/samples/${listed}`)).status).toBe(200);
    expect((await worker.request(`/train/00000000-0000-4000-8000-000000000000/samples/${listed}`)).status).toBe(404);
  });

  test("an OOM while sampling is cuda_oom with phase sampling, and says so", async () => {
    using tree = makeHostTree();
    await using worker = await startWorker(tree.writeConfig(FAILING_TABLES(0.002, "sample-oom@200")), { command: [binary] });
    const id = (await worker.postTrain(tree.validRequest({ samples: 2 }))).body.worker_job_id;
    const final = await untilEnded(worker, id);
    expect(final).toMatchObject({ status: "failed", error_code: "cuda_oom", phase: "sampling", resume_step: 175, resumable: true });
    expect(final.error).toContain("while taking preview samples");
    expect(final.samples.map((s: any) => s.step)).toEqual([100, 100, 100, 100]);
    // Contrast: the same failure plan without samples never samples, so it never fails there.
    const plain = (await worker.postTrain(tree.validRequest({ output_name: "plain" }))).body.worker_job_id;
    expect(await untilEnded(worker, plain)).toMatchObject({ status: "succeeded" });
  });
});
