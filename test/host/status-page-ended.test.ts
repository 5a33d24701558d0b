import { beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { copyFileSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { ensureBinary } from "../support/binary.ts";
import { chromiumForTests } from "../support/chromium.ts";
import { FAILING_TABLES, makeHostTree, type HostTree } from "../support/host-tree.ts";
import { openStatusPage, saveScreenshot } from "../support/status-page.ts";
import { waitFor } from "../support/wait.ts";
import { startWorker, type WorkerProcess } from "../support/worker-process.ts";

// How the page tells of jobs that ended: their previews, how they stopped and what to do; and an ended job a user
// chooses while another runs. The compiled worker runs simulated jobs; the page runs in a real headless Chromium.
setDefaultTimeout(60_000);

let binary: string;
beforeAll(() => {
  binary = ensureBinary();
}, 120_000);
const browser = chromiumForTests();

const HANG = FAILING_TABLES(0.01, "hang@5");
const STRIP = `document.getElementById("samples-strip").textContent`;
const jobRow = (id: string) => `(document.querySelector('#jobs tr[data-id="${id}"]')?.textContent ?? null)`;

async function post(worker: WorkerProcess, tree: HostTree, overrides: Record<string, unknown>): Promise<string> {
  const posted = await worker.postTrain(tree.validRequest(overrides));
  expect(posted.status).toBe(200);
  return posted.body.worker_job_id as string;
}

const record = async (worker: WorkerProcess, id: string) => (await worker.json(`/train/${id}`)).body;

async function until(worker: WorkerProcess, id: string, what: string, ok: (job: any) => boolean): Promise<any> {
  return waitFor(async () => {
    const job = await record(worker, id);
    return ok(job) ? job : null;
  }, `job ${id} ${what}`);
}

describe("the status page on ended jobs", () => {
  test("an ended job without previews says it drew none and why, a cancelled one reads as its user's cancel; contrasts: a running one's none yet, a watchdog's stop", async () => {
    using tree = makeHostTree();
    let stalled: string;
    let stalledAt: number;
    {
      // A watchdog stops this one with the same SIGTERM a cancel sends, and fails it: the record tells them apart.
      await using watched = await startWorker(tree.writeConfig(`${HANG}[watchdog]\nstall_seconds = 1\n`), { command: [binary] });
      stalled = await post(watched, tree, { samples: 1, output_name: "stalled" });
      const failed = await until(watched, stalled, "to fail", (j) => j.status === "failed");
      expect(failed).toMatchObject({ error_code: "stalled", signal: "SIGTERM" });
      stalledAt = failed.step;
    }
    await using worker = await startWorker(tree.writeConfig(HANG), { command: [binary] });
    const cancelled = await post(worker, tree, { output_name: "cancelled" });
    await until(worker, cancelled, "to reach its hang", (j) => j.step >= 4);
    expect((await worker.json(`/train/${cancelled}/cancel`, { method: "POST" })).body.status).toBe("cancelled");
    // What the page used to show as "stopped (SIGTERM)": the signal the worker sent for the user's cancel.
    const cancelledAt = await record(worker, cancelled);
    expect(cancelledAt.signal).toBe("SIGTERM");
    const running = await post(worker, tree, { samples: 1, output_name: "running" });
    await until(worker, running, "to reach its hang", (j) => j.step >= 4);

    const page = await openStatusPage(browser, worker);
    await page.until(`${jobRow(stalled)} !== null && ${jobRow(cancelled)} !== null`, "the ended jobs in the list");
    const cancelledRow = await page.evaluate<string>(jobRow(cancelled));
    expect(cancelledRow).toContain(`cancelled by its user at step ${cancelledAt.step}`);
    expect(cancelledRow).not.toContain("SIGTERM");
    // Contrast: the watchdog's stop reads as its error code, not as anyone's cancel.
    const stalledRow = await page.evaluate<string>(jobRow(stalled));
    expect(stalledRow).toContain("stalled");
    expect(stalledRow).not.toContain("cancelled by");

    const previewsOf = async (id: string) => {
      await page.evaluate(`focus(${JSON.stringify(id)})`);
      await page.until(`state.job?.worker_job_id === ${JSON.stringify(id)} && ${STRIP}.startsWith("None")`, `job ${id}'s card`);
      return page.evaluate<{ hidden: boolean; text: string }>(`({ hidden: document.getElementById("job-samples").hidden, text: ${STRIP} })`);
    };
    expect(await previewsOf(stalled)).toEqual({ hidden: false, text: `None drawn: the job ended at step ${stalledAt}, before its first preview.` });
    await saveScreenshot(page, "ended-before-previews");
    expect(await previewsOf(cancelled)).toEqual({ hidden: false, text: "None drawn: the request asked for no previews (samples: 0)." });
    // Contrast: a running job's first previews are still to come.
    expect(await previewsOf(running)).toEqual({ hidden: false, text: "None yet: the first are drawn a quarter of the way into the run." });
    expect(page.errors).toEqual([]);
    await worker.json(`/train/${running}/cancel`, { method: "POST" });
  });
});

describe("an ended job the user chose while another runs", () => {
  test("stays shown when the page's first look ends after the choice (a slow GPU probe); contrast: chosen by none, the page shows the running job", async () => {
    using tree = makeHostTree();
    // The worker's nvidia-smi answers the fixture's two cards, after delay-seconds once that file is written; each
    // /gpu-status asks it anew.
    const gpus = join(tree.root, "slow-gpus");
    mkdirSync(gpus);
    copyFileSync(join(import.meta.dir, "../fixtures/gpu/two-gpus-tts/query-gpu.csv"), join(gpus, "query-gpu.csv"));
    const config = tree.writeConfig(HANG.replace("[gpu]\n", "[gpu]\ncache_ttl_ms = 0\n"));
    await using worker = await startWorker(config, { command: [binary], env: { FAKE_NVIDIA_SMI_SCENARIO: gpus } });
    const ended = await post(worker, tree, { output_name: "ended" });
    await until(worker, ended, "to reach its hang", (j) => j.step >= 4);
    await worker.json(`/train/${ended}/cancel`, { method: "POST" });
    const running = await post(worker, tree, { output_name: "running" });
    await until(worker, running, "to reach its hang", (j) => j.step >= 4);
    writeFileSync(join(gpus, "delay-seconds"), "3\n");

    const firstLookDone = "state.lastActiveId !== undefined";
    const chosen = await openStatusPage(browser, worker);
    await chosen.until(`${jobRow(ended)} !== null`, "the ended job in the list");
    // The click lands before the first look has ended (it waits on the GPUs), or this test proves nothing.
    expect(await chosen.evaluate(`(focus(${JSON.stringify(ended)}), ${firstLookDone})`)).toBe(false);
    await chosen.until(firstLookDone, "the page's first look, GPUs included");
    expect(await chosen.evaluate("state.focusId")).toBe(ended);
    await chosen.until(`state.job?.worker_job_id === ${JSON.stringify(ended)}`, "the chosen job's card");

    const unchosen = await openStatusPage(browser, worker);
    await unchosen.until(firstLookDone, "the page's first look, GPUs included");
    expect(await unchosen.evaluate("state.focusId")).toBe(running);
    expect([...chosen.errors, ...unchosen.errors]).toEqual([]);
    await worker.json(`/train/${running}/cancel`, { method: "POST" });
  });
});
