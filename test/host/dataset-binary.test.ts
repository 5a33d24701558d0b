import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { chmodSync, chownSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { verifySafetensors } from "../../src/safetensors/verify.ts";
import { ensureBinary } from "../support/binary.ts";
import { AS_ROOT, STAND_IN } from "../support/install-root.ts";
import { makeHostTree, SIMULATE_TABLES, type HostTree } from "../support/host-tree.ts";
import { solidPng } from "../../src/png.ts";
import { snapshotFiles, spawnEvidence } from "../support/leftovers.ts";
import { waitFor } from "../support/wait.ts";
import { startWorker, type WorkerProcess } from "../support/worker-process.ts";

setDefaultTimeout(60_000);

// One compiled worker for the file; each case brings its own dataset folder inside the handoff root.
let tree: HostTree;
let worker: WorkerProcess;
beforeAll(async () => {
  tree = makeHostTree();
  worker = await startWorker(tree.writeConfig(`${SIMULATE_TABLES(0.001)}[dataset]\nmax_files = 10\n`), { command: [ensureBinary()] });
}, 120_000);
afterAll(async () => {
  await worker[Symbol.asyncDispose]();
  tree[Symbol.dispose]();
});

let cases = 0;
function dataset(captions: Record<string, string> = {}): { dir: string; request: Record<string, unknown> } {
  const name = `case${++cases}`;
  const dir = join(tree.handoff, name, "10_ohwx person");
  mkdirSync(dir, { recursive: true });
  for (const i of [0, 1]) writeFileSync(join(dir, `img${i}.png`), solidPng(8, 8, [i * 90, 60, 120]));
  for (const [file, text] of Object.entries(captions)) writeFileSync(join(dir, file), text);
  return { dir, request: tree.validRequest({ dataset_dir: join(tree.handoff, name), output_dir: join(tree.handoff, name, "out") }) };
}

async function finished(id: string): Promise<any> {
  return waitFor(async () => {
    const job = (await worker.json(`/train/${id}`)).body;
    return ["starting", "training"].includes(job.status) ? null : job;
  }, "the job to end", 30_000);
}

describe("the compiled worker checks every file the trainer would read", () => {
  const refused: Array<[string, (dir: string) => void, string]> = [
    ["a caption linked outside the handoff root", (dir) => symlinkSync("/etc/hostname", join(dir, "img0.txt")), "10_ohwx person/img0.txt leads out of the handoff root through a symbolic link"],
    ["an image linked outside the handoff root", (dir) => (rmSync(join(dir, "img1.png")), symlinkSync(join(tree.root, "config.toml"), join(dir, "img1.png"))), "10_ohwx person/img1.png leads out of the handoff root through a symbolic link"],
    ["a FIFO named *.png", (dir) => Bun.spawnSync(["mkfifo", join(dir, "img2.png")]), "10_ohwx person/img2.png is a FIFO, not a regular file"],
    ["a dataset over dataset.max_files", (dir) => { for (let i = 2; i < 7; i++) writeFileSync(join(dir, `img${i}.png`), "png"), writeFileSync(join(dir, `img${i}.txt`), "t"); }, "holds 13 images and captions; dataset.max_files allows 10"],
  ];
  for (const [name, arrange, msg] of refused) {
    test(`${name} is refused with the file named, and nothing starts`, async () => {
      const { dir, request } = dataset({ "img1.txt": "ohwx" });
      arrange(dir);
      const before = spawnEvidence(tree, worker.proc.pid);
      const answer = await worker.postTrain(request);
      expect(answer.status).toBe(422);
      expect(answer.body.detail[0].loc).toEqual(["body", "dataset_dir"]);
      expect(answer.body.detail[0].msg).toContain(msg);
      expect(spawnEvidence(tree, worker.proc.pid)).toEqual(before);
    });
  }
});

describe("the compiled worker trains on a private copy", () => {
  test("a caption swapped for an outside link after the copy does not reach the trainer, and arbo's folder is left as it was", async () => {
    const { dir, request } = dataset({ "img0.txt": "ohwx, blue shirt", "img1.txt": "ohwx, smiling" });
    const secret = join(tree.root, "secret.txt");
    writeFileSync(secret, "SECRET-TOKEN");
    const posted = await worker.postTrain(request);
    expect(posted.status).toBe(200);
    await waitFor(async () => (await worker.json(`/train/${posted.body.worker_job_id}`)).body.dataset, "the dataset copy");
    rmSync(join(dir, "img0.txt"));
    symlinkSync(secret, join(dir, "img0.txt"));
    const before = snapshotFiles(tree);

    const job = await finished(posted.body.worker_job_id);

    expect(job).toMatchObject({ status: "succeeded", dataset: { files: 4 } });
    const verdict = await verifySafetensors(job.lora_path);
    if (!verdict.ok) throw new Error(verdict.error.detail);
    expect(JSON.parse(verdict.value.metadata.ss_tag_frequency!)).toEqual({ "10_ohwx person": { ohwx: 2, "blue shirt": 1, smiling: 1 } });
    expect(readFileSync(job.lora_path, "latin1")).not.toContain("SECRET-TOKEN");
    // Nothing was added to arbo's folder (no latent caches): only the LoRA in out/ is new.
    expect(snapshotFiles(tree).filter((f) => !f.includes("/out"))).toEqual(before.filter((f) => !f.includes("/out")));
  });

  test("contrast: a caption linked inside the handoff root trains, and its tags reach the LoRA", async () => {
    const { dir, request } = dataset();
    writeFileSync(join(tree.handoff, "shared.txt"), "ohwx, red hat");
    symlinkSync(join(tree.handoff, "shared.txt"), join(dir, "img0.txt"));
    const posted = await worker.postTrain(request);
    expect(posted.status).toBe(200);
    const job = await finished(posted.body.worker_job_id);
    expect(job.status).toBe("succeeded");
    const verdict = await verifySafetensors(job.lora_path);
    // img1.png has no caption: it trains on the class tokens, as sd-scripts counts them.
    expect(verdict.ok && JSON.parse(verdict.value.metadata.ss_tag_frequency!)).toEqual({
      "10_ohwx person": { ohwx: 1, "red hat": 1, "ohwx person": 1 },
    });
  });
});

// As root every file is readable; the service account is what meets a file arbo's side left unreadable.
describe.skipIf(!AS_ROOT)("the compiled worker as an unprivileged account", () => {
  test("a dataset file the worker may not read is a 422 naming it before anything is copied; made readable, the run starts", async () => {
    using own = makeHostTree();
    const config = own.writeConfig(SIMULATE_TABLES(0.001));
    Bun.spawnSync(["chown", "-R", `${STAND_IN.uid}:${STAND_IN.gid}`, own.root]);
    const locked = join(own.dataset, "img1.png");
    chownSync(locked, 0, 0);
    chmodSync(locked, 0o600);
    const asAccount = ["setpriv", `--reuid=${STAND_IN.uid}`, `--regid=${STAND_IN.gid}`, "--clear-groups", ensureBinary()];
    await using account = await startWorker(config, { command: asAccount });
    const refused = await account.postTrain(own.validRequest());
    expect(refused.status).toBe(422);
    expect(refused.body.detail).toEqual([{ loc: ["body", "dataset_dir"], msg: expect.stringContaining("img1.png cannot be read by the worker (EACCES)"), type: "dataset_file_unreadable" }]);
    expect(existsSync(join(own.state, "jobs")) ? readdirSync(join(own.state, "jobs")) : []).toEqual([]);
    // Contrast: the same file, readable by the account, trains.
    chmodSync(locked, 0o644);
    const posted = await account.postTrain(own.validRequest());
    expect(posted.status).toBe(200);
    await waitFor(async () => {
      const { body } = await account.json(`/train/${posted.body.worker_job_id}`);
      return ["starting", "training"].includes(body.status) ? null : body;
    }, "the run to end", 30_000);
  });
});
