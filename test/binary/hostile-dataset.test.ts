import { beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { existsSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { MAX_CAPTION_BYTES } from "../../src/request/dataset.ts";
import { solidPng } from "../../src/png.ts";
import { ensureBinary } from "../support/binary.ts";
import { runCli } from "../support/cli-process.ts";
import { claimedPng, pngWithOrientation, tiffImage } from "../support/exif.ts";
import { makeHostTree, SIMULATE_TABLES, type HostTree } from "../support/host-tree.ts";
import { untilEnded } from "../support/jobs.ts";
import { writeTokenizers } from "../support/tokenizers.ts";
import { waitFor } from "../support/wait.ts";
import { startWorker, type WorkerProcess } from "../support/worker-process.ts";
import { randomLetters } from "../support/random-letters.ts";

// Issue 41 items 1-5, through the compiled binary: what a hostile or unlucky upload holds neither freezes the
// worker nor keeps a cancel waiting, every photo sd-scripts reads trains (or is refused saying what was checked),
// and the trigger is matched as CLIP reads it.
setDefaultTimeout(120_000);

let binary: string;
beforeAll(() => {
  binary = ensureBinary();
}, 120_000);

const jobDir = (tree: HostTree, id: string) => join(tree.state, "jobs", id);

// The worker's CPU time so far, in clock ticks (utime + stime, fields 14 and 15 of /proc/<pid>/stat).
function cpuTicks(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, "latin1").split(") ")[1]!.split(" ");
  return Number(fields[11]) + Number(fields[12]);
}

function rssKiB(pid: number): number {
  return Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))![1]);
}

// Asks /healthz one request after another until `done` settles: the longest wait and how many answered.
async function probe(worker: WorkerProcess, done: Promise<unknown>): Promise<{ longestMs: number; answers: number }> {
  let settled = false;
  void done.finally(() => (settled = true));
  let longestMs = 0;
  let answers = 0;
  while (!settled) {
    const started = performance.now();
    const res = await worker.request("/healthz");
    await res.arrayBuffer();
    longestMs = Math.max(longestMs, performance.now() - started);
    answers += 1;
  }
  return { longestMs, answers };
}

describe("a hostile dataset's preparation", () => {
  test("a /healthz prober never waits a second while captions of one 64,000- or 7,000-letter word are counted", async () => {
    using tree = makeHostTree();
    writeTokenizers(join(tree.state, "tokenizers"));
    // Letters without a pattern: a repeating word merges quickly even in CLIP's own quadratic loop. 7,000 letters
    // are few enough that only merging them shows they pass 225 tokens (a CLIP token spans at most 32 bytes).
    for (const [i, letters] of [[0, 64_000], [1, 7_000], [2, 64_000]]) {
      writeFileSync(join(tree.dataset, `img${i}.txt`), `${randomLetters(letters!)}\nsecond line`);
    }
    await using worker = await startWorker(tree.writeConfig(SIMULATE_TABLES(0.002)), { command: [binary] });
    const id = (await worker.postTrain(tree.validRequest())).body.worker_job_id;
    const ended = untilEnded(worker, id);
    const probed = await probe(worker, ended);
    const final = await ended;
    expect(final).toMatchObject({ status: "succeeded" });
    // Contrast: the hostile work was done: each caption was counted by CLIP's tokenizer, and past what it reads.
    const cut = ["img0.txt", "img1.txt", "img2.txt"].map((caption) => ({ caption, tokens: 226 }));
    expect(final.dataset.prepared.captions).toMatchObject({ tokens_counted_by: "clip tokenizer", cut });
    expect(probed.answers).toBeGreaterThan(0);
    expect(probed.longestMs).toBeLessThan(1000);
    // The count stops past what the trainer reads, and `status` says so rather than a number it did not count.
    const status = await runCli(binary, ["status", id], { LORA_WORKER_URL: worker.url });
    expect(status.stdout).toContain("cut      img0.txt: more than 225 tokens, more than the text encoders read");
  });

  test("a 90 MiB caption is refused by name at the request, read by nobody; one of the bound's size trains", async () => {
    using tree = makeHostTree();
    const huge = join(tree.dataset, "img0.txt");
    writeFileSync(huge, Buffer.alloc(90 * 1024 * 1024, "ohwx\n"));
    await using worker = await startWorker(tree.writeConfig(SIMULATE_TABLES(0.002)), { command: [binary] });
    const before = rssKiB(worker.proc.pid);
    const refused = await worker.postTrain(tree.validRequest());
    expect(refused.status).toBe(422);
    expect(refused.body.detail).toEqual([{
      loc: ["body", "dataset_dir"],
      msg: `${tree.dataset} img0.txt is ${90 * 1024 * 1024} bytes; a caption may hold at most ${MAX_CAPTION_BYTES} ` +
        "(the trainer reads one line)",
      type: "dataset_file_too_large",
    }]);
    expect(rssKiB(worker.proc.pid) - before).toBeLessThan(64 * 1024);
    expect((await worker.json("/train")).body.jobs).toEqual([]);
    // Contrast: at the bound, the caption trains on its first line.
    writeFileSync(huge, Buffer.alloc(MAX_CAPTION_BYTES, "ohwx\n"));
    const id = (await worker.postTrain(tree.validRequest())).body.worker_job_id;
    expect(await untilEnded(worker, id)).toMatchObject({ status: "succeeded" });
  });

  test("a cancel while a large photo is turned answers within a second and leaves no directory", async () => {
    using tree = makeHostTree();
    const photo = pngWithOrientation(solidPng(6000, 6000, [90, 60, 30]), 6);
    writeFileSync(join(tree.dataset, "img0.png"), photo);
    await using worker = await startWorker(tree.writeConfig(SIMULATE_TABLES(0.002)), { command: [binary] });
    const id = (await worker.postTrain(tree.validRequest())).body.worker_job_id;
    const copied = join(jobDir(tree, id), "dataset", "images", "img0.png");
    await waitFor(() => existsSync(copied) && statSync(copied).size === photo.length, "the photo to be copied");
    // The turn is under way once the worker has spent a third of a second more on CPU than the copy took.
    const ticks = cpuTicks(worker.proc.pid);
    await waitFor(() => cpuTicks(worker.proc.pid) - ticks >= 33, "the turn to be under way");
    const started = performance.now();
    const cancelled = await worker.json(`/train/${id}/cancel`, { method: "POST" });
    const answeredMs = performance.now() - started;
    expect(cancelled).toMatchObject({ status: 200, body: { status: "cancelled", phase: "preparing" } });
    expect(existsSync(jobDir(tree, id))).toBe(false);
    expect(answeredMs).toBeLessThan(1000);
    // Contrast: unhindered, the same photo is turned (so the cancelled turn had work left), and the job it was
    // abandoned by gains no directory once that turn is long over.
    const next = (await worker.postTrain(tree.validRequest())).body.worker_job_id;
    const final = await untilEnded(worker, next);
    expect(final).toMatchObject({ status: "succeeded", dataset: { prepared: { turned_upright: ["img0.png"] } } });
    expect(existsSync(jobDir(tree, id))).toBe(false);
  });

  test("a pause while a large photo is turned is on record at once; the run it launches stops at its first state", async () => {
    using tree = makeHostTree();
    writeFileSync(join(tree.dataset, "img0.png"), pngWithOrientation(solidPng(6000, 6000, [90, 60, 30]), 6));
    await using worker = await startWorker(tree.writeConfig(SIMULATE_TABLES(0.01)), { command: [binary] });
    const id = (await worker.postTrain(tree.validRequest())).body.worker_job_id;
    const copied = join(jobDir(tree, id), "dataset", "images", "img0.png");
    await waitFor(() => existsSync(copied), "the copy to begin");
    const ticks = cpuTicks(worker.proc.pid);
    await waitFor(() => cpuTicks(worker.proc.pid) - ticks >= 33, "the copy and the turn to be under way");
    // The answer waits for the run's first saved state, as a pause's does in every phase (docs/api.md).
    const pausing = worker.json(`/train/${id}/pause`, { method: "POST" });
    const asked = await waitFor(async () => {
      const job = (await worker.json(`/train/${id}`)).body;
      return job.pause_requested_at === undefined ? null : job;
    }, "the pause to be on record");
    // On record while the photo is still being turned: the pause waited for no decode to be written down.
    expect(asked).toMatchObject({ status: "starting", phase: "preparing" });
    const paused = await pausing;
    expect(paused).toMatchObject({ status: 200, body: { status: "cancelled", paused: true, resumable: true } });
    // The photo was turned before the run: the pause let the preparation finish.
    expect(paused.body.dataset.prepared.turned_upright).toEqual(["img0.png"]);
  });
});

describe("photos sd-scripts reads", () => {
  test("a TIFF under a .png name, a 100-megapixel photo, a shared caption and a look-alike trigger train as sd-scripts would", async () => {
    using tree = makeHostTree();
    writeFileSync(join(tree.dataset, "img0.png"), tiffImage(64, 48));
    writeFileSync(join(tree.dataset, "img1.png"), claimedPng(10_000, 10_000));
    writeFileSync(join(tree.dataset, "img2.jpg"), await new Bun.Image(solidPng(8, 8, [1, 2, 3])).jpeg().bytes());
    // img2.png and img2.jpg share img2.txt; "ſkſ" is not "sks" to CLIP, so that caption gets the trigger.
    writeFileSync(join(tree.dataset, "img2.txt"), "ſkſ woman, red hat");
    await using worker = await startWorker(tree.writeConfig(SIMULATE_TABLES(0.002)), { command: [binary] });
    const id = (await worker.postTrain(tree.validRequest({ trigger: "sks", subject_class: "woman" }))).body.worker_job_id;
    const final = await untilEnded(worker, id);
    expect({ status: final.status, error: final.error ?? null }).toEqual({ status: "succeeded", error: null });
    expect(final.dataset.files).toBe(5);
    expect(final.dataset.prepared).toMatchObject({
      captions: { trigger_added: 1, trigger_present: 0 },
      large: [{ image: "img1.png", width: 10_000, height: 10_000 }],
    });
    const copy = join(jobDir(tree, id), "dataset", "images");
    expect(readFileSync(join(copy, "img2.txt"), "utf8")).toBe("sks woman, ſkſ woman, red hat");
    expect(new Uint8Array(readFileSync(join(copy, "img0.png")))).toEqual(tiffImage(64, 48));
    const status = await runCli(binary, ["status", id], { LORA_WORKER_URL: worker.url });
    expect(status.stdout).toContain("large    img1.png (10000x10000): over Pillow's 89,478,485 pixels, it warns");
  });

  test("past Pillow's refusal a photo is refused saying what was checked; bytes no reader knows, saying what was tried", async () => {
    using tree = makeHostTree();
    writeFileSync(join(tree.dataset, "img1.png"), claimedPng(20_000, 10_000));
    await using worker = await startWorker(tree.writeConfig(SIMULATE_TABLES(0.002)), { command: [binary] });
    const big = await untilEnded(worker, (await worker.postTrain(tree.validRequest())).body.worker_job_id);
    expect(big).toMatchObject({ status: "failed", error_code: "dataset_invalid" });
    expect(big.error).toBe(
      `${tree.dataset}: img1.png is 20000x10000, 200000000 pixels: Pillow, which sd-scripts reads images with, ` +
        "refuses an image over 178956970 pixels as a decompression bomb",
    );
    writeFileSync(join(tree.dataset, "img1.png"), "not a picture");
    const unknown = await untilEnded(worker, (await worker.postTrain(tree.validRequest())).body.worker_job_id);
    expect(unknown).toMatchObject({ status: "failed", error_code: "dataset_invalid" });
    expect(unknown.error).not.toContain("trainer");
    expect(unknown.error).toContain("img1.png is none of the image formats the worker reads");
  });
});
