import { describe, expect, setDefaultTimeout, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { chromiumForTests, PHONE } from "../support/chromium.ts";
import { runCli } from "../support/cli-process.ts";
import { MAIN, SIMULATE_TABLES, makeHostTree, type HostTree } from "../support/host-tree.ts";
import { OVERFLOWS, openStatusPage, saveScreenshot } from "../support/status-page.ts";
import { waitFor } from "../support/wait.ts";
import { startWorker, type WorkerProcess } from "../support/worker-process.ts";
import { isFastStateStep, untilEnded as ended } from "../support/jobs.ts";
import { NEXT_STEPS } from "../../src/api/next-steps.ts";

// Pause and resume as a person meets them: the client commands (run from source against a real worker from
// source) and the status page in headless Chromium. The simulated fast run saves a state every 40 steps.
// The worker's own pause and resume are tested end to end in pause-resume.test.ts.
setDefaultTimeout(60_000);

const UNKNOWN_JOB = "3f1c2a4e-0000-4000-8000-000000000000";

const cli = (worker: WorkerProcess, ...args: string[]) => runCli(process.execPath, [MAIN, ...args], { LORA_WORKER_URL: worker.url });
const withFailure = (plan: string) => SIMULATE_TABLES(0.002).replace("[simulate]\n", `[simulate]\nfail = ${JSON.stringify(plan)}\n`);

async function endedJob(worker: WorkerProcess, tree: HostTree): Promise<any> {
  const posted = await worker.postTrain(tree.validRequest());
  expect(posted.status).toBe(200);
  return untilEnded(worker, posted.body.worker_job_id);
}

const untilEnded = (worker: WorkerProcess, id: string) => ended(worker, id, 30_000);

describe("lora-worker pause and resume against a worker running simulated jobs", () => {
  test("pause of a job that already ended prints how it ended and exits by its status; resume of one without a saved state prints why with the refusal code", async () => {
    using tree = makeHostTree();
    await using worker = await startWorker(tree.writeConfig(withFailure("exit@3:1")));
    const failed = await endedJob(worker, tree);
    expect(failed).toMatchObject({ status: "failed", resume_step: null, resumable: false, paused: false });
    const id = failed.worker_job_id;

    const [pause, pauseJson, resume, unknown] = await Promise.all([
      cli(worker, "pause", id),
      cli(worker, "pause", id, "--json"),
      cli(worker, "resume", id),
      Promise.all([cli(worker, "pause", UNKNOWN_JOB), cli(worker, "resume", UNKNOWN_JOB)]),
    ]);
    expect(pause).toEqual({ exitCode: 1, stdout: expect.stringMatching(new RegExp(`^job ${id} had already ended, failed after \\d+s: trainer_crashed \\(exit code 1\\)\\n`)), stderr: "" });
    expect(pause.stdout).not.toContain("resume with");
    expect(pauseJson.exitCode).toBe(1);
    expect(JSON.parse(pauseJson.stdout)).toMatchObject({ worker_job_id: id, status: "failed", paused: false, resumable: false });
    expect(resume).toEqual({
      exitCode: 5,
      stdout: "",
      stderr: `lora-worker resume: the worker answered 409: job ${id} cannot be resumed: it saved no state before it ended (a fast run saves one every 40 steps) (reason: not_resumable)\n`,
    });
    expect(unknown.map((r) => [r.exitCode, r.stderr])).toEqual([
      [6, `lora-worker pause: no such job: ${UNKNOWN_JOB}\n`],
      [6, `lora-worker resume: no such job: ${UNKNOWN_JOB}\n`],
    ]);
  });

  test("a job that failed after its first state: status shows the state, its LoRA and how to resume; resume --follow continues it and status links the two", async () => {
    using tree = makeHostTree();
    let id: string;
    {
      await using worker = await startWorker(tree.writeConfig(withFailure("oom@50")));
      id = (await endedJob(worker, tree)).worker_job_id;
      const status = await cli(worker, "status", id);
      expect(status.exitCode).toBe(1);
      expect(status.stdout).toContain(`\nresume   from step 40 (the newest saved state)\nsaved    step 40: ${worker.url}/train/${id}/checkpoints/40\nfailed after `);
      expect(status.stdout).toEndWith(`\nresume with: lora-worker resume ${id}\n`);
      // What to do comes before the resume: out of memory, another card first.
      // Its three steps as the page's numbered list, one a line.
      const steps = NEXT_STEPS.cuda_oom.steps.map((step, i) => `  ${i + 1}. ${step.replaceAll("`", "")}\n`).join("");
      expect(NEXT_STEPS.cuda_oom.steps).toHaveLength(3);
      expect(status.stdout).toContain(`\nwhat to do:\n${steps}resume with: `);
      const pause = await cli(worker, "pause", id);
      expect(pause.exitCode).toBe(1);
      expect(pause.stdout).toMatch(new RegExp(`^job ${id} had already ended, failed after \\d+s: cuda_oom`));
      expect(pause.stdout).toEndWith(`\nresume with: lora-worker resume ${id}\n`);
    }

    // The same state dir without the failure plan: what ran out of memory has gone.
    await using worker = await startWorker(tree.writeConfig(SIMULATE_TABLES(0.002)));
    const resume = await cli(worker, "resume", id, "--follow");
    expect({ exitCode: resume.exitCode, stderr: resume.stderr }).toEqual({ exitCode: 0, stderr: "" });
    const lines = resume.stdout.trimEnd().split("\n");
    const next = new RegExp(`^job (\\S+) resumed from ${id} at step 40$`).exec(lines[0]!)?.[1];
    expect(next).toBeDefined();
    expect(lines.at(-1)).toMatch(/^succeeded after \d+s: .*mylora\.safetensors/);

    const [successor, predecessor, again] = await Promise.all([cli(worker, "status", next!), cli(worker, "status", id), cli(worker, "resume", id)]);
    expect(successor.exitCode).toBe(0);
    expect(successor.stdout).toContain(`\nresumed  from job ${id} at step 40\n`);
    expect(successor.stdout).not.toContain("resume with");
    expect(predecessor.stdout).toContain(`\nresumed  by job ${next}\n`);
    expect(predecessor.stdout).not.toContain("resume with");
    expect(again.exitCode).toBe(5);
    expect(again.stderr).toContain(`job ${id} was already resumed by job ${next}`);
  });

  test("pause of a running job waits for its next saved state and prints where it stopped and how to go on; its follower exits 7", async () => {
    using tree = makeHostTree();
    await using worker = await startWorker(tree.writeConfig(SIMULATE_TABLES(0.01)));
    const request = join(tree.root, "request.json");
    writeFileSync(request, JSON.stringify(tree.validRequest()));
    const following = cli(worker, "submit", request, "--follow");
    const id = await waitFor(async () => (await worker.json("/healthz")).body.active_job_id as string | null, "the submitted job");
    const asked = await waitFor(async () => (await worker.json(`/train/${id}`)).body.step as number, "the first step");
    const pause = await cli(worker, "pause", id);
    // The state at step 40 as a rule; a loaded host may pass it before the CLI's pause arrives (isFastStateStep).
    const { resume_step: at } = (await worker.json(`/train/${id}`)).body;
    expect(isFastStateStep(at, asked - 1)).toBe(true);
    expect(pause).toEqual({ exitCode: 0, stdout: `job ${id} paused at step ${at} (resumable: lora-worker resume ${id})\n`, stderr: "" });
    // Paused is not cancelled: the follower's exit code says the job can go on (a cancel's is 3, in cli.test.ts).
    const followed = await following;
    expect(followed.exitCode).toBe(7);
    expect(followed.stdout).toMatch(new RegExp(`\npaused after \\d+s at step ${at}\nresume with: lora-worker resume ${id}\n$`));
    const status = await cli(worker, "status", id);
    expect(status.exitCode).toBe(7);
    expect(status.stdout).toContain("\nstatus   cancelled (paused), phase ");
    expect(status.stdout).toMatch(new RegExp(`\npaused after \\d+s at step ${at}\nresume with: `));

    // Resumed, it is paused no longer: status, pause and jobs say resumed and name the job that went on.
    const next = (await worker.json(`/train/${id}/resume`, { method: "POST" })).body.worker_job_id as string;
    const [after, pauseAgain, pausedList] = await Promise.all([cli(worker, "status", id), cli(worker, "pause", id), cli(worker, "jobs", "--status", "paused")]);
    expect(after.exitCode).toBe(3);
    expect(after.stdout).toContain("\nstatus   cancelled (resumed), phase ");
    expect(after.stdout).toMatch(new RegExp(`\ncancelled after \\d+s, resumed by job ${next}\n$`));
    expect(pauseAgain.stdout).toMatch(new RegExp(`^job ${id} had already ended, cancelled after \\d+s, resumed by job ${next}\n$`));
    expect(pausedList).toEqual({ exitCode: 0, stdout: "no paused jobs\n", stderr: "" });
    await worker.json(`/train/${next}/cancel`, { method: "POST" });
  });
});

describe("the status page's pause and resume, in headless Chromium", () => {
  const browser = chromiumForTests();

  const shown = (id: string) => `!document.getElementById(${JSON.stringify(id)}).hidden`;
  const text = (id: string) => `document.getElementById(${JSON.stringify(id)}).textContent`;
  // The badges the job's card shows beside its title.
  const HEAD_BADGES = `[...document.querySelectorAll("#job-panel .card-head .badge")].filter((b) => !b.hidden).map((b) => b.textContent)`;
  const rowBadges = (id: string) => `[...document.querySelectorAll('#jobs tr[data-id="${id}"] .badge')].map((b) => b.textContent)`;

  test("a running job has Pause and no Resume; paused, it has Resume, which starts and shows the job that continues it", async () => {
    using tree = makeHostTree();
    // 0.1 s a step: the page sees the job run, and the pause asked, well before its first state at step 40.
    await using worker = await startWorker(tree.writeConfig(SIMULATE_TABLES(0.1)));
    const id = (await worker.postTrain(tree.validRequest())).body.worker_job_id as string;
    const page = await openStatusPage(browser, worker);

    await page.until(`${text("job-id")} === ${JSON.stringify(id)} && ${shown("job-pause")}`, "the running job with a Pause button");
    expect(await page.evaluate(`[${shown("job-resume")}, ${text("job-phase")}]`)).toEqual([false, expect.stringMatching(/^(preparing|loading|caching|training)$/)]);
    expect((await worker.json(`/train/${id}`)).body.step).toBeLessThan(25);
    await page.evaluate(`document.getElementById("job-pause").click()`);
    // While it goes on to its state, the page says where it will stop instead of counting down to the end.
    await page.until(`${text("job-eta")} === "pausing at step 40"`, "where the pause stops the run");
    const pausing = (await worker.json(`/train/${id}`)).body;
    if (pausing.status !== "cancelled") expect(pausing).toMatchObject({ pause_step: 40 });
    await page.until(`${text("job-status")} === "paused" && ${shown("job-resume")}`, "the paused job with a Resume button", 30_000);
    // One word for what the job is: paused, not cancelled beside it; the phase tile says it too, not "training".
    expect(await page.evaluate(HEAD_BADGES)).toEqual(["paused", "simulated", "resumable"]);
    expect(await page.evaluate(`[${text("job-phase")}, ${text("job-phase-note")}]`)).toEqual(["paused", "at step 40"]);
    expect(await page.evaluate(`[${shown("job-pause")}, ${text("job-meta")}.includes("saved state: step 40")]`)).toEqual([false, true]);
    await page.until(`document.querySelector('#jobs tr[data-id="${id}"]')?.textContent.includes("paused at step 40")`, "the list to say where it paused");
    expect(await page.evaluate(rowBadges(id))).toEqual(["paused", "resumable"]);
    expect(await page.evaluate(`[${shown("job-resumable")}, ${shown("job-resume-plain")}]`)).toEqual([true, false]);
    // The saved state is marked on the curve's step axis.
    await page.until(`document.querySelectorAll("#loss-curve .checkpoint").length === 1`, "a mark at the saved state");
    expect(await page.evaluate(`document.querySelector("#loss-curve .checkpoint title").textContent`)).toBe("saved state at step 40");
    await saveScreenshot(page, "paused-job");
    const phone = await openStatusPage(browser, worker, PHONE);
    await phone.until(shown("job-resume"), "the Resume button on a phone");
    expect(await phone.evaluate(OVERFLOWS)).toEqual([]);
    await saveScreenshot(phone, "paused-job-phone");

    await page.evaluate(`document.getElementById("job-resume").click()`);
    const next = await page.until<string>(`${text("job-id")} !== ${JSON.stringify(id)} && ${text("job-id")}`, "the page to show the new job");
    expect((await worker.json(`/train/${id}`)).body).toMatchObject({ resumed_by: next, resumable: false });
    await page.until(`${text("job-meta")}.includes("resumed from ${id.slice(0, 8)} at step 40")`, "the link to the paused job");
    // Its curve starts with the paused job's, drawn up to step 40.
    const before = Number(await page.until<string>(`document.getElementById("loss-curve").dataset.before !== "0" && document.getElementById("loss-curve").dataset.before`, "the chain's earlier points"));
    const earlier = (await worker.json(`/train/${id}/metrics?max_points=500`)).body.points.filter(([step]: [number]) => step <= 40);
    expect(before).toBe(earlier.length);
    expect(await page.evaluate(`[${shown("job-resume")}, ${shown("job-action-problem")}]`)).toEqual([false, false]);
    await saveScreenshot(page, "resumed-job");

    // The link leads back; that job now names its successor and offers no second resume.
    await page.evaluate(`document.querySelector("#job-meta button.link").click()`);
    await page.until(`${text("job-id")} === ${JSON.stringify(id)} && ${text("job-meta")}.includes("resumed by ${next.slice(0, 8)}")`, "the paused job, linked to its successor");
    expect(await page.evaluate(shown("job-resume"))).toBe(false);
    // Resumed, it is paused no longer: one badge says so, in its card and in the list, and the tile agrees.
    expect(await page.evaluate(HEAD_BADGES)).toEqual(["resumed", "simulated"]);
    expect(await page.evaluate(`[${text("job-phase")}, ${text("job-phase-note")}]`)).toEqual(["resumed", `by ${next.slice(0, 8)}`]);
    await page.until(`(${rowBadges(id)}).join() === "resumed"`, "the list to say it was resumed");
    expect(await page.evaluate(`document.querySelector('#jobs tr[data-id="${id}"]').textContent`)).toContain(`resumed by ${next.slice(0, 8)}`);
    expect((await worker.json(`/train?status=paused`)).body.jobs).toEqual([]);
    expect(page.errors).toEqual([]);
  });

  test("Cancel asks first: kept, the job runs on; confirmed, it is cancelled. The log's tail opens below", async () => {
    using tree = makeHostTree();
    await using worker = await startWorker(tree.writeConfig(SIMULATE_TABLES(0.05)));
    const id = (await worker.postTrain(tree.validRequest())).body.worker_job_id as string;
    const page = await openStatusPage(browser, worker);
    await page.until(`${text("job-id")} === ${JSON.stringify(id)} && ${shown("job-cancel")}`, "the running job with a Cancel button");

    await page.evaluate(`document.getElementById("job-log").open = true`);
    await page.until(`${text("job-log-text")}.includes("steps:")`, "the trainer's bar in the log's tail");

    await page.evaluate(`document.getElementById("job-cancel").click()`);
    await page.until(`document.getElementById("cancel-dialog").open`, "the question");
    expect(await page.evaluate(text("cancel-text"))).toMatch(new RegExp(`^Job ${id} stops now, at step \\d+\\. It has no saved state yet`));
    await page.evaluate(`document.getElementById("cancel-keep").click()`);
    await page.until(`!document.getElementById("cancel-dialog").open`, "the dialog to close");
    // Contrast: kept, nothing was asked of the worker.
    const kept = (await worker.json(`/train/${id}`)).body;
    expect(["starting", "training"]).toContain(kept.status);

    await page.evaluate(`document.getElementById("job-cancel").click()`);
    await page.until(`document.getElementById("cancel-dialog").open`, "the question again");
    await page.evaluate(`document.getElementById("cancel-confirm").click()`);
    await page.until(`${text("job-status")} === "cancelled" && !${shown("job-cancel")}`, "the cancelled job");
    expect(await page.evaluate(`[${text("job-phase")}, ${text("job-phase-note")}]`)).toEqual(["cancelled", expect.stringMatching(/^while (preparing|loading|caching|training)$/)]);
    expect((await worker.json(`/train/${id}`)).body).toMatchObject({ status: "cancelled", paused: false });
    expect(page.errors).toEqual([]);
  });

  test("a run that failed drawing its previews offers Resume without previews, which continues it with none", async () => {
    using tree = makeHostTree();
    // Step 100's previews were drawn and the state of step 175 saved; the GPU runs out of memory drawing step 200's.
    await using worker = await startWorker(tree.writeConfig(withFailure("sample-oom@200")));
    const failed = await untilEnded(worker, (await worker.postTrain(tree.validRequest({ samples: 2 }))).body.worker_job_id);
    expect(failed).toMatchObject({ status: "failed", error_code: "cuda_oom", phase: "sampling", resumable: true });
    const id = failed.worker_job_id as string;
    const page = await openStatusPage(browser, worker);
    await page.until(`document.querySelector('#jobs tr[data-id="${id}"]')`, "the failed job in the list");
    expect(await page.evaluate(rowBadges(id))).toEqual(["failed", "resumable"]);
    await page.evaluate(`document.querySelector('#jobs tr[data-id="${id}"]').click()`);
    await page.until(`${text("job-id")} === ${JSON.stringify(id)} && ${shown("job-resume-plain")}`, "the failed job with Resume without previews");
    expect(await page.evaluate(`[${shown("job-resume")}, ${shown("job-resumable")}]`)).toEqual([true, true]);
    expect(await page.evaluate(`[${text("job-phase")}, ${text("job-phase-note")}]`)).toEqual(["failed", "while sampling"]);
    await saveScreenshot(page, "failed-while-sampling");

    await page.evaluate(`document.getElementById("job-resume-plain").click()`);
    const next = await page.until<string>(`${text("job-id")} !== ${JSON.stringify(id)} && ${text("job-id")}`, "the page to show the new job");
    const resumed = await untilEnded(worker, next);
    // No previews this time: the run goes on past step 200 to the end.
    expect(resumed).toMatchObject({ status: "succeeded", resumed_from: id, request: { samples: 0 } });
    expect(page.errors).toEqual([]);
  });

  test("contrast: a run that drew no previews and crashed has only Resume, first, and its own next step", async () => {
    using tree = makeHostTree();
    await using worker = await startWorker(tree.writeConfig(withFailure("exit@50:1")));
    const id = (await endedJob(worker, tree)).worker_job_id as string;
    const page = await openStatusPage(browser, worker);
    await page.until(`document.querySelector('#jobs tr[data-id="${id}"]')`, "the failed job in the list");
    await page.evaluate(`document.querySelector('#jobs tr[data-id="${id}"]').click()`);
    await page.until(`${text("job-id")} === ${JSON.stringify(id)} && ${shown("job-resume")}`, "the failed job with Resume");
    expect(await page.evaluate(`[${shown("job-resume-plain")}, ${shown("job-resumable")}, ${shown("job-retry-elsewhere")}]`)).toEqual([false, true, false]);
    expect(await page.evaluate(`document.getElementById("job-resume").classList.contains("primary")`)).toBe(true);
    // One step reads as a line, no list.
    expect(await page.evaluate(text("job-next-step"))).toBe(`What to do: ${NEXT_STEPS.trainer_crashed.text.replaceAll("`", "")}`);
    expect(await page.evaluate(`document.querySelector("#job-next-step ol")`)).toBeNull();
  });

  test("a job that ran out of GPU memory says what to do, and offers sending it again on the other card before Resume, which starts it there", async () => {
    using tree = makeHostTree();
    await using worker = await startWorker(tree.writeConfig(withFailure("oom@50")));
    const failed = await endedJob(worker, tree);
    expect(failed).toMatchObject({ error_code: "cuda_oom", resumable: true, request: { device_index: 0 }, next_step: NEXT_STEPS.cuda_oom });
    const id = failed.worker_job_id as string;
    const page = await openStatusPage(browser, worker);
    await page.until(`document.querySelector('#jobs tr[data-id="${id}"]')`, "the failed job in the list");
    await page.evaluate(`document.querySelector('#jobs tr[data-id="${id}"]').click()`);
    await page.until(`${text("job-id")} === ${JSON.stringify(id)} && ${shown("job-retry-elsewhere")}`, "the failed job with Send again");
    // The doc's words as a numbered list, a step an item, its code marks shown as code; the other card first and
    // primary, Resume after it and plain.
    const items = `[...document.querySelectorAll("#job-next-step ol > li")].map((li) => li.textContent)`;
    expect(await page.evaluate(items)).toEqual(NEXT_STEPS.cuda_oom.steps.map((step) => step.replaceAll("`", "")));
    expect(await page.evaluate(`document.querySelector("#job-next-step strong").textContent`)).toBe("What to do: ");
    expect(await page.evaluate(`[...document.querySelectorAll("#job-next-step code")].map((c) => c.textContent)`)).toContain("lora-worker gpu");
    const buttons = `[...document.querySelectorAll(".job-actions button")].filter((b) => !b.hidden).map((b) => [b.textContent, b.classList.contains("primary")])`;
    expect(await page.evaluate(buttons)).toEqual([["Send again on GPU 1", true], ["Resume", false]]);
    await saveScreenshot(page, "failed-out-of-memory");

    await page.evaluate(`document.getElementById("job-retry-elsewhere").click()`);
    const next = await page.until<string>(`${text("job-id")} !== ${JSON.stringify(id)} && ${text("job-id")}`, "the page to show the new job");
    expect((await worker.json(`/train/${next}`)).body).toMatchObject({ request: { ...failed.request, device_index: 1 } });
    expect(page.errors).toEqual([]);
  });
});
