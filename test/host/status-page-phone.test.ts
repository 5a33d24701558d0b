import { beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { ensureBinary } from "../support/binary.ts";
import { chromiumForTests, PHONE, type Page } from "../support/chromium.ts";
import { SIMULATE_TABLES, makeHostTree } from "../support/host-tree.ts";
import { OVERFLOWS, gpuScenario, openStatusPage, saveScreenshot } from "../support/status-page.ts";
import { startWorker } from "../support/worker-process.ts";
import { waitFor } from "../support/wait.ts";

// The status page of the compiled binary at a phone's width (390 px), in a real headless Chromium.
setDefaultTimeout(90_000);

const LONG_NAME = "ohwx_person_balanced_seed1234_rev3_final_phone";
const STEP_SHOWN = `Number(/step (\\d+) \\/ 400/.exec(document.getElementById("job-step").textContent)?.[1] ?? 0)`;
const FIGURES = `[...document.querySelectorAll(".stat")].map((s) => [s.querySelector(".label").textContent, s.querySelector(".value").textContent])`;
const FIGURE_ROWS = `new Set([...document.querySelectorAll(".stat")].map((s) => Math.round(s.getBoundingClientRect().top))).size`;
// Each job row's output, and its status and outcome where they are on screen inside the card (else false).
const JOB_ROWS = `[...document.querySelectorAll("#jobs tbody tr")].map((tr) => {
  const card = document.getElementById("jobs-panel").getBoundingClientRect();
  const shown = (td) => {
    const box = td.getBoundingClientRect();
    return box.width > 0 && box.left >= card.left && box.right <= card.right && box.right <= innerWidth && td.textContent;
  };
  return { output: tr.cells[2].textContent, status: shown(tr.cells[4]), outcome: shown(tr.cells[7]) };
})`;

// The widest values each field can take, rendered by the page's own functions (checked in the same task, so a refresh cannot interleave).
const WIDEST_NAME = `ohwx_person_balanced_seed4294967295_rev12_final_variant_b.v2-xl`;
const widest = (over: Record<string, unknown>) => ({
  worker_job_id: crypto.randomUUID(),
  status: "failed", phase: "training", step: 2999, total_steps: 3000, loss: 12345.678, eta_s: null,
  created_at: "2026-01-02T03:04:05.000Z", started_at: "2026-01-02T03:04:06.000Z", ended_at: "2026-01-06T07:09:06.000Z",
  simulated: true, forced_kill: true, error_code: "base_model_invalid", error: "x".repeat(400), signal: "SIGKILL",
  request: { output_name: WIDEST_NAME, tier: "quality", device_index: 63 },
  ...over,
});
const WIDEST_JOBS = [
  widest({ status: "training", phase: "training", error_code: undefined, error: undefined, ended_at: undefined, eta_s: 86_000 }),
  widest({}),
  widest({ status: "cancelled", error_code: undefined, error: undefined }),
  widest({ status: "succeeded", phase: "done", error_code: undefined, error: undefined, lora_path: `/worktank/arbo/train/t-123/out/${WIDEST_NAME}.safetensors`, lora_bytes: 1_073_741_823, lora_sha256: "f".repeat(64) }),
];
const RENDER_WIDEST = `(() => {
  state.jobs = ${JSON.stringify(WIDEST_JOBS)};
  state.job = { ...state.jobs[0], started_at: new Date(Date.now() - 360000000).toISOString() };
  renderJob();
  renderJobs();
  return ${OVERFLOWS};
})()`;

let binary: string;
beforeAll(() => {
  binary = ensureBinary();
}, 120_000);
const browser = chromiumForTests();

// Waits until `condition`, an expression over `rows`, holds in the page, and returns the rows.
async function jobRows(page: Page, condition: string, what: string) {
  return page.until<Array<{ output: string; status: string | false; outcome: string | false }>>(`((rows) => (${condition}) && rows)(${JOB_ROWS})`, what);
}

describe("the status page at a phone's width (390 px)", () => {
  test("shows the key figures whole, the GPUs and every job's status and outcome, and nothing overflows its box", async () => {
    using tree = makeHostTree();
    await using worker = await startWorker(tree.writeConfig(SIMULATE_TABLES(0.02)), { command: [binary], env: { FAKE_NVIDIA_SMI_SCENARIO: gpuScenario(tree) } });
    const first = (await worker.postTrain(tree.validRequest())).body.worker_job_id as string;
    await waitFor(async () => (await worker.json(`/train/${first}`)).body.status === "succeeded", "the first job to succeed", 45_000);
    const second = (await worker.postTrain(tree.validRequest({ output_name: LONG_NAME }))).body.worker_job_id as string;
    const page = await openStatusPage(browser, worker, PHONE);

    await page.until(`${STEP_SHOWN} > 0 && document.querySelectorAll("#gpus .gpu").length === 2`, "the running job's progress and the GPUs");
    const running = await jobRows(page, `rows.length === 2 && rows[0].status === "training sim"`, "both jobs in the list");
    expect(running).toEqual([
      { output: LONG_NAME, status: "training sim", outcome: "training" },
      { output: "mylora", status: "succeeded sim", outcome: expect.stringMatching(/^LoRA \d+\.\d MiB$/) },
    ]);
    expect(await page.evaluate(FIGURES)).toEqual([
      ["Phase", "training"],
      ["Loss", expect.stringMatching(/^\d\.\d+$/)],
      ["ETA", expect.stringMatching(/^\d+ s$|^\d+ m \d\d s$/)],
      ["Elapsed", expect.stringMatching(/^\d+ s$/)],
    ]);
    expect(await page.evaluate(FIGURE_ROWS)).toBe(2);
    expect(await page.evaluate(OVERFLOWS)).toEqual([]);
    await saveScreenshot(page, "phone-running-job", { fullPage: true });

    expect((await worker.json(`/train/${second}/cancel`, { method: "POST" })).body.status).toBe("cancelled");
    const ended = await jobRows(page, `rows[0].status === "cancelled sim"`, "the list to show the job cancelled");
    expect(ended[0]).toEqual({ output: LONG_NAME, status: "cancelled sim", outcome: expect.stringMatching(/^cancelled by its user at step \d+$/) });
    expect(await page.evaluate(OVERFLOWS)).toEqual([]);

    expect(await page.evaluate(RENDER_WIDEST)).toEqual([]);
    await saveScreenshot(page, "phone-widest-values", { fullPage: true });
    expect(page.errors).toEqual([]);
  });

  test("contrast: the desktop's four figures across, forced at 390 px, are found overflowing their boxes", async () => {
    using tree = makeHostTree();
    await using worker = await startWorker(tree.writeConfig(SIMULATE_TABLES(0.02)), { command: [binary] });
    const page = await openStatusPage(browser, worker, PHONE);
    await page.until(`!document.getElementById("jobs-empty").hidden`, "the page to load its (empty) job list");
    // Rendered, checked, forced and checked again in one task, so a refresh cannot interleave.
    const forced = `(() => {
      const asServed = ${RENDER_WIDEST};
      document.querySelector(".stats").style.gridTemplateColumns = "repeat(4, minmax(0, 1fr))";
      return [asServed, ${OVERFLOWS}.filter((p) => p.includes(".value holds")).map((p) => p.split(" holds")[0])];
    })()`;
    expect(await page.evaluate(forced)).toEqual([[], ["div#job-phase.value", "div#job-loss.value", "div#job-eta.value", "div#job-elapsed.value"]]);
  });
});
