import { beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { appendFileSync, existsSync, readdirSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { ensureBinary } from "../support/binary.ts";
import { makeHostTree, paddedPng, SIMULATE_TABLES, type HostTree } from "../support/host-tree.ts";
import { processesMarkedWith } from "../support/job-processes.ts";
import { slowReads } from "../support/slow-reads.ts";
import { waitFor } from "../support/wait.ts";
import { startWorker, type WorkerProcess } from "../support/worker-process.ts";
import { untilEnded } from "../support/jobs.ts";

// Issue 26, §4, through the compiled binary: POST /train answers once the job is claimed; the dataset copy is the
// job's first phase, `preparing`, seen in its record and its event stream, cancellable, and a worker killed in the
// middle of it leaves the job on record. The copy is held in the middle by strace delaying each read of one image.
setDefaultTimeout(90_000);

const READ_DELAY_MS = 400;
// Four 1 MiB reads of the big image, each held READ_DELAY_MS: the copy takes about 2 s.
const BIG_IMAGE_BYTES = 4 * 1024 * 1024;

let binary: string;
beforeAll(() => {
  binary = ensureBinary();
}, 120_000);

const bigImage = (tree: HostTree) => join(tree.dataset, "img0.png");
const jobDir = (tree: HostTree, id: string) => join(tree.state, "jobs", id);

// The copy has begun on the big image (its first read is being held).
const untilCopying = (tree: HostTree, id: string) =>
  waitFor(() => existsSync(join(jobDir(tree, id), "dataset", "images", "img0.png")), "the copy of img0.png to begin");

function treeWithBigImage(): HostTree {
  const tree = makeHostTree();
  writeFileSync(bigImage(tree), paddedPng(BIG_IMAGE_BYTES));
  return tree;
}

// The first event of the job's stream, parsed.
async function firstEvent(worker: WorkerProcess, id: string): Promise<{ event: string; data: any }> {
  const abort = new AbortController();
  const res = await worker.request(`/train/${id}/events`, { signal: abort.signal });
  const reader = res.body!.getReader();
  let text = "";
  while (!text.includes("\n\n")) text += new TextDecoder().decode((await reader.read()).value);
  abort.abort();
  const block = text.slice(0, text.indexOf("\n\n"));
  return { event: /^event: (.*)$/m.exec(block)![1]!, data: JSON.parse(/^data: (.*)$/m.exec(block)![1]!) };
}

describe("the preparing phase", () => {
  test("the answer comes before the copy; the job and its stream say preparing; a cancel there starts nothing", async () => {
    using tree = treeWithBigImage();
    await using worker = await startWorker(tree.writeConfig(SIMULATE_TABLES(0.002)), { command: [binary] });
    let id: string;
    {
      await using _slow = await slowReads(worker.proc.pid, bigImage(tree), READ_DELAY_MS);
      const answer = await worker.postTrain(tree.validRequest());
      expect(answer).toMatchObject({ status: 200, body: { status: "starting" } });
      id = answer.body.worker_job_id;
      const record = (await worker.json(`/train/${id}`)).body;
      expect(record).toMatchObject({ status: "starting", phase: "preparing" });
      expect(record.dataset).toBeUndefined();
      expect(await firstEvent(worker, id)).toMatchObject({ event: "job", data: { phase: "preparing" } });
      // The slot is held while the job prepares.
      const second = await worker.postTrain(tree.validRequest({ output_name: "other" }));
      expect(second).toMatchObject({ status: 409, body: { reason: "busy", active_job_id: id } });

      const cancelled = await worker.json(`/train/${id}/cancel`, { method: "POST" });
      expect(cancelled).toMatchObject({ status: 200, body: { status: "cancelled", phase: "preparing" } });
      expect(cancelled.body.error_code ?? cancelled.body.exit_code ?? null).toBeNull();
    }
    expect(processesMarkedWith(id)).toEqual([]);
    expect(existsSync(join(jobDir(tree, id), "dataset"))).toBe(false);
    expect(existsSync(join(jobDir(tree, id), "job.json"))).toBe(false);
    expect((await worker.json(`/train/${id}`)).body).toMatchObject({ status: "cancelled", resumable: false });

    // Contrast: unhindered, the next job leaves preparing, records what it copied and runs to the end.
    const next = (await worker.postTrain(tree.validRequest())).body.worker_job_id;
    const final = await untilEnded(worker, next);
    const others = ["img1.png", "img2.png"].reduce((sum, name) => sum + statSync(join(tree.dataset, name)).size, 0);
    expect(final).toMatchObject({ status: "succeeded", dataset: { files: 3, bytes: BIG_IMAGE_BYTES + others } });
  });

  test("a worker killed -9 while it copies: the job stays on record and the next start fails it, saying so, and removes its copy", async () => {
    using tree = treeWithBigImage();
    const config = tree.writeConfig(SIMULATE_TABLES(0.002));
    let id: string;
    {
      const first = await startWorker(config, { command: [binary] });
      await using _slow = await slowReads(first.proc.pid, bigImage(tree), READ_DELAY_MS);
      id = (await first.postTrain(tree.validRequest())).body.worker_job_id;
      await untilCopying(tree, id);
      expect((await first.json(`/train/${id}`)).body.phase).toBe("preparing");
      first.proc.kill("SIGKILL");
      await first.proc.exited;
    }
    expect(readdirSync(join(tree.state, "jobs"))).toEqual([id]);
    // Contrast: the partial copy is there until the restart.
    expect(existsSync(join(jobDir(tree, id), "dataset", "images", "img0.png"))).toBe(true);
    await using second = await startWorker(config, { command: [binary] });
    const failed = (await second.json(`/train/${id}`)).body;
    expect(failed).toMatchObject({ status: "failed", error_code: "worker_restarted" });
    expect(failed.error).toBe(
      "the worker restarted while it copied this job's dataset, before any trainer was started; nothing was " +
        "trained: send the request again",
    );
    // A job that never trained keeps nothing: its directory, which held only the half copy, goes whole at the
    // restart, not with retention a month later (the contrast, a job that trained and keeps its directory, is
    // end-to-end.test.ts's "neither shim nor trainer alive").
    expect(existsSync(jobDir(tree, id))).toBe(false);
    expect(readdirSync(join(tree.state, "jobs"))).toEqual([]);
    // Contrast: the slot is free again, and the same request now trains.
    const again = (await second.postTrain(tree.validRequest())).body.worker_job_id;
    expect(await untilEnded(second, again)).toMatchObject({ status: "succeeded" });
  });

  test("an image rewritten while it is copied fails the job dataset_changed, naming it; nothing is trained", async () => {
    using tree = treeWithBigImage();
    await using worker = await startWorker(tree.writeConfig(SIMULATE_TABLES(0.002)), { command: [binary] });
    let id: string;
    {
      await using _slow = await slowReads(worker.proc.pid, bigImage(tree), READ_DELAY_MS);
      id = (await worker.postTrain(tree.validRequest())).body.worker_job_id;
      await untilCopying(tree, id);
      appendFileSync(bigImage(tree), "more");
      const final = await untilEnded(worker, id);
      expect(final).toMatchObject({ status: "failed", error_code: "dataset_changed" });
      expect(final.error).toBe(`${tree.dataset}: img0.png changed after it was checked`);
    }
    expect(existsSync(join(jobDir(tree, id), "run"))).toBe(false);
    expect(existsSync(join(jobDir(tree, id), "dataset"))).toBe(false);
  });
});
