import { beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { SMOKE_FOLDER } from "../../src/smoke/dataset.ts";
import { solidPng } from "../../src/png.ts";
import { ensureBinary } from "../support/binary.ts";
import { type HostTree, makeHostTree, paddedPng, SIMULATE_TABLES, sha256, outDir } from "../support/host-tree.ts";
import { untilEnded } from "../support/jobs.ts";
import { slowReads } from "../support/slow-reads.ts";
import { waitFor } from "../support/wait.ts";
import { startWorker, type WorkerProcess } from "../support/worker-process.ts";

// Issue 35 §2, through the compiled binary: what arbo lays in the handoff root after the 200 (a FIFO where the
// worker reads or writes, a link where a folder was) can neither hang the worker nor lead it out of the root;
// the job fails with a code that says whose file changed.
setDefaultTimeout(90_000);

let binary: string;
beforeAll(() => {
  binary = ensureBinary();
}, 120_000);

const mkfifo = (path: string) => expect(Bun.spawnSync(["mkfifo", path]).exitCode).toBe(0);
const worker = (tree: HostTree) => startWorker(tree.writeConfig(SIMULATE_TABLES(0.005)), { command: [binary] });
const untilStep = (w: WorkerProcess, id: string) =>
  waitFor(async () => (await w.json(`/train/${id}`)).body.step > 5, "a few steps");

// The worker still serves and takes the next job: nothing of the failed one holds it.
async function stillServes(w: WorkerProcess, tree: HostTree): Promise<void> {
  expect((await w.json("/healthz")).status).toBe(200);
  const next = await w.postTrain(tree.validRequest({ output_name: "next" }));
  expect(next.status).toBe(200);
  const final = await untilEnded(w, next.body.worker_job_id);
  expect(final.status).toBe("succeeded");
  expect(sha256(readFileSync(final.lora_path))).toBe(final.lora_sha256);
}

describe("a FIFO where the publish writes", () => {
  test("at <output_dir>/<output_name>.safetensors: the job fails publish_failed, and the worker takes the next job", async () => {
    using tree = makeHostTree();
    await using w = await worker(tree);
    const id = (await w.postTrain(tree.validRequest())).body.worker_job_id;
    await untilStep(w, id);
    mkdirSync(outDir(tree), { recursive: true });
    mkfifo(join(outDir(tree), "mylora.safetensors"));
    const final = await untilEnded(w, id, 30_000);
    expect(final).toMatchObject({ status: "failed", error_code: "publish_failed", exit_code: 0 });
    expect(final.error).toBe("output_dir/mylora.safetensors appeared while the job ran (a FIFO); it was not replaced, and the LoRA was not published");
    await stillServes(w, tree);
  });

  test("at the publish's temporary name, which the job id gives away: publish_failed naming it, the FIFO left as it is", async () => {
    using tree = makeHostTree();
    await using w = await worker(tree);
    const id = (await w.postTrain(tree.validRequest())).body.worker_job_id;
    await untilStep(w, id);
    const partial = `.mylora.safetensors.${id}.partial`;
    mkdirSync(outDir(tree), { recursive: true });
    mkfifo(join(outDir(tree), partial));
    const final = await untilEnded(w, id, 30_000);
    expect(final).toMatchObject({ status: "failed", error_code: "publish_failed" });
    expect(final.error).toBe(`output_dir/${partial}, the name output_dir/mylora.safetensors is written under before it is linked into place, is a FIFO; the LoRA was not published`);
    expect(readdirSync(outDir(tree))).toEqual([partial]);
    await stillServes(w, tree);
  });
});

describe("a link laid where output_dir's folders were", () => {
  const swaps: Array<[string, (tree: HostTree, outside: string) => void, string]> = [
    ["output_dir itself", (tree, outside) => symlinkSync(outside, outDir(tree)), "job1/out"],
    ["a folder above output_dir", (tree, outside) => {
      renameSync(join(tree.handoff, "job1"), join(outside, "job1"));
      symlinkSync(join(outside, "job1"), join(tree.handoff, "job1"));
    }, "job1"],
  ];
  for (const [what, swap, named] of swaps) {
    test(`${what} replaced by a link out of the root after the 200: publish_failed naming it, nothing lands outside`, async () => {
      using tree = makeHostTree();
      const outside = join(tree.root, "outside");
      mkdirSync(outside);
      await using w = await worker(tree);
      const id = (await w.postTrain(tree.validRequest())).body.worker_job_id;
      await untilStep(w, id);
      swap(tree, outside);
      const final = await untilEnded(w, id, 30_000);
      expect(final).toMatchObject({ status: "failed", error_code: "publish_failed", exit_code: 0 });
      expect(final.error).toBe(`${named} in the handoff root, on the way to output_dir, is a symbolic link now, not the folder that was checked; the LoRA was not published`);
      expect(readdirSync(outside, { recursive: true }).filter((f) => String(f).includes("safetensors") || String(f).endsWith("out"))).toEqual([]);
    });
  }

  test("contrast: output_dir made by arbo as a real folder while the job runs receives the LoRA", async () => {
    using tree = makeHostTree();
    await using w = await worker(tree);
    const id = (await w.postTrain(tree.validRequest())).body.worker_job_id;
    await untilStep(w, id);
    mkdirSync(outDir(tree), { recursive: true });
    const final = await untilEnded(w, id, 30_000);
    expect(final).toMatchObject({ status: "succeeded", lora_path: join(outDir(tree), "mylora.safetensors") });
    expect(readdirSync(outDir(tree))).toEqual(["mylora.safetensors"]);
  });
});

describe("a run adopted after a restart", () => {
  // A worker killed -9 mid-run, the trainer ended while it was down, `between` done, and the worker started again.
  async function adoptedEnd(tree: HostTree, request: Record<string, unknown>, between: () => void): Promise<any> {
    const config = tree.writeConfig(SIMULATE_TABLES(0.005));
    let id: string;
    {
      await using first = await startWorker(config, { command: [binary] });
      id = (await first.postTrain(request)).body.worker_job_id;
      await untilStep(first, id);
    }
    await waitFor(() => existsSync(join(tree.state, "jobs", id, "exit.json")), "the trainer to end while the worker is down", 30_000);
    between();
    await using second = await startWorker(config, { command: [binary] });
    return await untilEnded(second, id, 30_000);
  }

  test("publishes through an output_dir reached by a link inside the root, as its check did", async () => {
    using tree = makeHostTree();
    symlinkSync(join(tree.handoff, "job1"), join(tree.handoff, "alias"));
    const final = await adoptedEnd(tree, tree.validRequest({ output_dir: join(tree.handoff, "alias", "out") }), () => {});
    expect(final).toMatchObject({ status: "succeeded", lora_path: join(outDir(tree), "mylora.safetensors") });
    expect(readdirSync(outDir(tree))).toEqual(["mylora.safetensors"]);
  });

  test("contrast: that link turned out of the root while the worker was down is publish_failed, nothing lands outside", async () => {
    using tree = makeHostTree();
    const outside = join(tree.root, "outside");
    mkdirSync(outside);
    symlinkSync(join(tree.handoff, "job1"), join(tree.handoff, "alias"));
    const final = await adoptedEnd(tree, tree.validRequest({ output_dir: join(tree.handoff, "alias", "out") }), () => {
      rmSync(join(tree.handoff, "alias"));
      symlinkSync(outside, join(tree.handoff, "alias"));
    });
    expect(final).toMatchObject({ status: "failed", error_code: "publish_failed" });
    expect(final.error).toStartWith("alias in the handoff root, on the way to output_dir, is a symbolic link now");
    expect(readdirSync(outside)).toEqual([]);
  });
});

describe("an image swapped while the dataset is copied", () => {
  const READ_DELAY_MS = 400;
  // Four 1 MiB reads of img0.png, each held READ_DELAY_MS: img1.png is opened about 1.6 s after the 200.
  const BIG_IMAGE_BYTES = 4 * 1024 * 1024;
  const kinds: Array<[string, (path: string) => Disposable]> = [
    ["a FIFO", (path) => (mkfifo(path), { [Symbol.dispose]() {} })],
    ["a socket", (path) => {
      const socket = Bun.listen({ unix: path, socket: { data() {} } });
      return { [Symbol.dispose]: () => socket.stop(true) };
    }],
  ];
  for (const [kind, make] of kinds) {
    test(`for ${kind}: dataset_changed naming it as arbo sent it, at once, and the worker takes the next job`, async () => {
      using tree = makeHostTree();
      writeFileSync(join(tree.dataset, "img0.png"), paddedPng(BIG_IMAGE_BYTES));
      await using w = await worker(tree);
      let id: string;
      {
        await using _slow = await slowReads(w.proc.pid, join(tree.dataset, "img0.png"), READ_DELAY_MS);
        id = (await w.postTrain(tree.validRequest())).body.worker_job_id;
        rmSync(join(tree.dataset, "img1.png"));
        using _swapped = make(join(tree.dataset, "img1.png"));
        const final = await untilEnded(w, id, 30_000);
        expect(final).toMatchObject({ status: "failed", error_code: "dataset_changed", phase: "preparing" });
        expect(final.error).toBe(`${tree.dataset}: img1.png changed after it was checked: it is ${kind} now, not a regular file`);
      }
      expect(existsSync(join(tree.state, "jobs", id, "run"))).toBe(false);
      // (Written over, the FIFO would hold this test as it held the copy.)
      rmSync(join(tree.dataset, "img1.png"), { force: true });
      writeFileSync(join(tree.dataset, "img1.png"), solidPng(8, 8, [40, 120, 200]));
      await stillServes(w, tree);
    });
  }
});

describe("the smoke run's folder", () => {
  test("a link at <handoff_root>/.lora-worker-smoke: POST /smoke is 409 and writes nothing through it; without it, 200", async () => {
    using tree = makeHostTree();
    const config = tree.writeConfig(`${SIMULATE_TABLES(0.2)}[smoke]\nbase_model = ${JSON.stringify(tree.model)}\n`);
    await using w = await startWorker(config, { command: [binary] });
    const outside = join(tree.root, "outside");
    mkdirSync(outside);
    symlinkSync(outside, join(tree.handoff, SMOKE_FOLDER));
    const smoke = () => w.json("/smoke", { method: "POST", headers: { "content-type": "application/json" }, body: '{"device_index":0}' });
    expect(await smoke()).toEqual({ status: 409, body: {
      reason: "smoke_unavailable",
      detail: `the smoke run's folder cannot be used: ${SMOKE_FOLDER} in the handoff root is a symbolic link, not a folder the worker made`,
    } });
    expect(readdirSync(outside)).toEqual([]);
    // Contrast: the link gone, the run's folder is made in the root and the run claimed.
    rmSync(join(tree.handoff, SMOKE_FOLDER));
    const ran = await smoke();
    expect(ran.status).toBe(200);
    expect(readdirSync(join(tree.handoff, SMOKE_FOLDER))).toHaveLength(1);
    await w.json(`/train/${ran.body.worker_job_id}/cancel`, { method: "POST" });
  });
});
