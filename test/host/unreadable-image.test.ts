import { describe, expect, setDefaultTimeout, test } from "bun:test";
import { chmodSync, chownSync, existsSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { solidPng } from "../../src/png.ts";
import { ensureBinary } from "../support/binary.ts";
import { makeHostTree, SIMULATE_TABLES } from "../support/host-tree.ts";
import { AS_ROOT, STAND_IN } from "../support/install-root.ts";
import { untilEnded } from "../support/jobs.ts";
import { slowReads } from "../support/slow-reads.ts";
import { startWorker } from "../support/worker-process.ts";

// Issue 35 §2, through the compiled binary as the service account (root reads a file whatever its mode): an image
// arbo makes unreadable after the 200 is arbo's file that changed, dataset_changed naming it as arbo sent it, not
// dataset_copy_failed blaming the job directory. The copy is held on a big first image by strace.
setDefaultTimeout(90_000);

const READ_DELAY_MS = 400;
const BIG_IMAGE_BYTES = 4 * 1024 * 1024;

describe.skipIf(!AS_ROOT)("an image made unreadable while the dataset is copied", () => {
  test("fails the job dataset_changed, naming the file as sent; untouched, the same request trains", async () => {
    using tree = makeHostTree();
    // A decodable PNG padded to size (decoders stop at IEND): big enough to hold the copy on it.
    const big = new Uint8Array(BIG_IMAGE_BYTES);
    big.set(solidPng(8, 8, [0, 120, 200]));
    writeFileSync(join(tree.dataset, "img0.png"), big);
    const config = tree.writeConfig(SIMULATE_TABLES(0.002));
    Bun.spawnSync(["chown", "-R", `${STAND_IN.uid}:${STAND_IN.gid}`, tree.root]);
    const asAccount = ["setpriv", `--reuid=${STAND_IN.uid}`, `--regid=${STAND_IN.gid}`, "--clear-groups", ensureBinary()];
    await using worker = await startWorker(config, { command: asAccount });
    const locked = join(tree.dataset, "img1.png");
    let id: string;
    {
      await using _slow = await slowReads(worker.proc.pid, join(tree.dataset, "img0.png"), READ_DELAY_MS);
      id = (await worker.postTrain(tree.validRequest())).body.worker_job_id;
      chownSync(locked, 0, 0);
      chmodSync(locked, 0o600);
      const final = await untilEnded(worker, id, 30_000);
      expect(final).toMatchObject({ status: "failed", error_code: "dataset_changed", phase: "preparing" });
      expect(final.error).toBe(`${tree.dataset}: img1.png changed after it was checked: the worker may no longer read it (EACCES)`);
    }
    expect(existsSync(join(tree.state, "jobs", id, "run"))).toBe(false);
    // Contrast: the file readable by the account again, the next job copies it and trains.
    chmodSync(locked, 0o644);
    const next = (await worker.postTrain(tree.validRequest())).body.worker_job_id;
    expect(await untilEnded(worker, next)).toMatchObject({ status: "succeeded" });
  });
});
