import { beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { join } from "node:path";
import { TOKEN_A, writeTokens } from "../support/auth-setup.ts";
import { ensureBinary } from "../support/binary.ts";
import { chromiumForTests, PHONE, type Page } from "../support/chromium.ts";
import { runCli } from "../support/cli-process.ts";
import { MAIN, SIMULATE_TABLES, makeHostTree } from "../support/host-tree.ts";
import { OVERFLOWS, openStatusPage, saveScreenshot } from "../support/status-page.ts";
import { startWorker, type WorkerProcess } from "../support/worker-process.ts";
import { untilEnded as ended } from "../support/jobs.ts";

// Preview samples (issue 19) as a person meets them: the status page's strip in headless Chromium, behind a
// token, and `lora-worker status`. The simulated fast run draws them at steps 100, 200, 300 and 400, each template
// with the trigger and with the class alone, and writes real 768 px PNGs.
setDefaultTimeout(90_000);

const ALL_STEPS = [400, 300, 200, 100];
// The labels of a samples: 2 job's images at each step drawn.
const TWO_TEMPLATES = ["portrait", "portrait · class", "full body", "full body · class"];

// Expressions evaluated in the page.
const STRIP = `[...document.querySelectorAll("#samples-strip .sample-row")].map((row) => ({
  step: row.querySelector(".sample-step").textContent,
  images: [...row.querySelectorAll(".sample")].map((b) => ({ label: b.querySelector(".sample-label").textContent, width: b.querySelector("img").naturalWidth })),
}))`;
type Strip = Array<{ step: string; images: Array<{ label: string; width: number }> }>;
const SAMPLE_FETCHES = `performance.getEntriesByType("resource").map((e) => new URL(e.name).pathname).filter((p) => p.includes("/samples/"))`;
const DECODED = `[...document.querySelectorAll("#samples-strip img")].filter((img) => img.naturalWidth > 0).length`;
const untilEnded = (worker: WorkerProcess, id: string, init?: RequestInit) => ended(worker, id, 60_000, init);

let binary: string;
beforeAll(() => {
  binary = ensureBinary();
}, 120_000);
const browser = chromiumForTests();

async function enterToken(page: Page) {
  await page.until(`document.getElementById("token-dialog").open`, "the token form");
  await page.focus("#token-input");
  await page.type(TOKEN_A);
  await page.pressEnter();
}

describe("preview samples on the status page and in the client", () => {
  test("behind a token, a samples: 2 job's strip grows live, newest step first, each image fetched once and decoded, and a click opens the full image", async () => {
    using tree = makeHostTree();
    const tokenFile = writeTokens(join(tree.root, "etc"), [TOKEN_A]);
    // 400 steps at 0.03 s: previews about every 3 s, so the page sees the strip grow.
    await using worker = await startWorker(tree.writeConfig(`${SIMULATE_TABLES(0.03)}[auth]\ntoken_file = ${JSON.stringify(tokenFile)}\n`), { command: [binary] });
    const auth = { authorization: `Bearer ${TOKEN_A}` };
    const posted = await worker.json("/train", { method: "POST", headers: { ...auth, "content-type": "application/json" }, body: JSON.stringify(tree.validRequest({ samples: 2 })) });
    const id = posted.body.worker_job_id as string;
    const page = await openStatusPage(browser, worker);
    await page.evaluate("performance.setResourceTimingBufferSize(10000)");
    await enterToken(page);

    // The first step's images, decoded; then a later step's land above them without reloading them.
    await page.until(`document.querySelector('#samples-strip .sample-row[data-step="100"] img')?.naturalWidth > 0`, "the step 100 previews to show", 30_000);
    await page.evaluate(`window.__first = document.querySelector('#samples-strip .sample-row[data-step="100"] img'); window.__firstSrc = window.__first.src`);
    await page.until(`document.querySelector("#samples-strip .sample-row").dataset.step !== "100"`, "a newer step on top", 30_000);
    const final = await untilEnded(worker, id, { headers: auth });
    expect(final).toMatchObject({ status: "succeeded", request: { samples: 2 } });
    await page.until(`document.getElementById("job-status").textContent === "succeeded" && document.querySelectorAll("#samples-strip .sample-row").length === 4`, "all four steps drawn after the run");
    expect(await page.evaluate(`[window.__first.isConnected, window.__first.src === window.__firstSrc, window.__first.src.startsWith("blob:")]`)).toEqual([true, true, true]);
    expect(await page.evaluate(text("#samples-note"))).toBe("4 per step drawn · 4 steps drawn");

    const strip = await page.until<Strip>(`((rows) => rows[0].images.every((i) => i.width > 0) && rows)(${STRIP})`, "the newest row decoded");
    expect(strip.map((row) => [row.step, row.images.map((i) => i.label)])).toEqual(ALL_STEPS.map((step) => [`step ${step}`, TWO_TEMPLATES]));
    await saveScreenshot(page, "samples-strip");
    // Each step came in on top while the page watched, so every image was fetched as it arrived, and once.
    await page.evaluate(`document.getElementById("samples-strip").scrollTop = 1e6`);
    await page.until(`${DECODED} === 16`, "every preview decoded", 20_000);
    expect((await page.evaluate<Strip>(STRIP)).flatMap((row) => row.images.map((i) => i.width))).toEqual(Array(16).fill(768));
    const fetched = await page.evaluate<string[]>(SAMPLE_FETCHES);
    expect(fetched.toSorted()).toEqual(final.samples.map((s: { url: string }) => s.url).toSorted());

    // Shown by prompt: a row a prompt, with its text, its images from the first step drawn to the last, the same
    // tiles (already fetched) labelled by their step.
    await page.evaluate(`(() => { const g = document.getElementById("samples-group"); g.value = "prompt"; g.dispatchEvent(new Event("change")); })()`);
    const byPrompt = await page.evaluate<Array<{ label: string; prompt: string; steps: string[] }>>(`[...document.querySelectorAll("#samples-strip .sample-row")].map((row) => ({
      label: row.querySelector(".sample-step").firstChild.textContent, prompt: row.querySelector(".sample-prompt").textContent,
      steps: [...row.querySelectorAll(".sample-label")].map((l) => l.textContent) }))`);
    const steps = ALL_STEPS.toReversed().map((step) => `step ${step}`);
    expect(byPrompt).toEqual([
      { label: "portrait", prompt: "portrait photo of ohwx person, head and shoulders, looking at the camera, soft light", steps },
      { label: "portrait · class", prompt: "portrait photo of person, head and shoulders, looking at the camera, soft light", steps },
      { label: "full body", prompt: "full body photo of ohwx person, standing, outdoors, natural light", steps },
      { label: "full body · class", prompt: "full body photo of person, standing, outdoors, natural light", steps },
    ]);
    expect(await page.evaluate(`${DECODED}`)).toBe(16);
    expect(final.samples.map((s: { prompt: string }) => s.prompt).slice(0, 4)).toEqual(byPrompt.map((row) => row.prompt));
    await saveScreenshot(page, "samples-by-prompt");
    // Contrast: back to each step drawn, a row a step again.
    await page.evaluate(`(() => { const g = document.getElementById("samples-group"); g.value = "step"; g.dispatchEvent(new Event("change")); })()`);
    expect((await page.evaluate<Strip>(STRIP)).map((row) => row.step)).toEqual(ALL_STEPS.map((step) => `step ${step}`));

    // A click opens the full image.
    await page.evaluate(`document.querySelector('#samples-strip .sample-row[data-step="400"] .sample').click()`);
    await page.until(`document.getElementById("sample-dialog").open && document.getElementById("sample-full").naturalWidth > 0`, "the full image");
    expect(await page.evaluate(`[${text("#sample-title")}, ${text("#sample-name")}, document.getElementById("sample-full").naturalWidth]`)).toEqual(["step 400 · portrait", final.samples[12].name, 768]);
    await saveScreenshot(page, "samples-full-image");
    await page.evaluate(`document.getElementById("sample-close").click()`);
    // The dialog's close event, which lets the image go, is dispatched after the click returns.
    await page.until(`!document.getElementById("sample-dialog").open && !document.getElementById("sample-full").hasAttribute("src")`, "the dialog to close and let its image go");
    expect(await page.evaluate(OVERFLOWS)).toEqual([]);
    expect(page.errors).toEqual([]);
  });

  test("at a phone's width the strip fits and fetches a finished run's older rows only as they scroll into view; a sampling phase says so, and an ended job without samples says it asked for none", async () => {
    using tree = makeHostTree();
    await using worker = await startWorker(tree.writeConfig(SIMULATE_TABLES(0.002)), { command: [binary] });
    const plain = (await worker.postTrain(tree.validRequest())).body.worker_job_id as string;
    await untilEnded(worker, plain);
    const id = (await worker.postTrain(tree.validRequest({ samples: 4, output_name: "with_previews" }))).body.worker_job_id as string;
    await untilEnded(worker, id);
    const page = await openStatusPage(browser, worker, PHONE);

    const strip = await page.until<Strip>(`document.getElementById("job-id").textContent === "${id}" && ((rows) => rows.length === 4 && rows[0].images.every((i) => i.width > 0) && rows)(${STRIP})`, "the job's newest previews");
    expect(strip[0]!.images.map((i) => i.label)).toEqual(["portrait", "full body", "close up", "candid"].flatMap((t) => [t, `${t} · class`]));
    expect(await page.evaluate(OVERFLOWS)).toEqual([]);
    await saveScreenshot(page, "phone-samples", { fullPage: true });
    // The strip shows a few rows of a finished run: the oldest are fetched only once they scroll into view.
    expect(strip.at(-1)!.images.map((i) => i.width)).toEqual(Array(8).fill(0));
    expect(await page.evaluate<string[]>(SAMPLE_FETCHES)).not.toContain(`/train/${id}/samples/${(await worker.json(`/train/${id}`)).body.samples[0].name}`);
    await page.evaluate(`document.getElementById("samples-strip").scrollTop = 1e6`);
    await page.until(`${DECODED} === 32`, "every preview decoded after scrolling", 20_000);

    // A step's sampling, rendered by the page's own functions in one task.
    const sampling = `(() => {
      state.job = { ...state.job, status: "training", phase: "sampling", step: 200, ended_at: undefined };
      renderJob();
      return [${text("#job-phase")}, ${text("#samples-note")}];
    })()`;
    expect(await page.evaluate(sampling)).toEqual(["sampling", "drawing 8 previews at step 200…"]);

    await page.evaluate(`focus(${JSON.stringify(plain)})`);
    await page.until(`document.getElementById("job-id").textContent === "${plain}"`, "the job without samples");
    // An ended job that asked for none says so under an empty strip.
    const none = `[document.querySelector("#samples-strip .empty")?.textContent, document.querySelectorAll("#samples-strip .sample").length]`;
    expect(await page.evaluate(none)).toEqual(["None drawn: the request asked for no previews (samples: 0).", 0]);
    expect(page.errors).toEqual([]);
  });

  test("status ID prints each step's preview URLs, which serve the PNG with the token and a 401 without; --json is the record", async () => {
    using tree = makeHostTree();
    const tokenFile = writeTokens(join(tree.root, "etc"), [TOKEN_A]);
    await using worker = await startWorker(tree.writeConfig(`${SIMULATE_TABLES(0.002)}[auth]\ntoken_file = ${JSON.stringify(tokenFile)}\n`));
    const auth = { authorization: `Bearer ${TOKEN_A}` };
    const posted = await worker.json("/train", { method: "POST", headers: { ...auth, "content-type": "application/json" }, body: JSON.stringify(tree.validRequest({ samples: 2 })) });
    const final = await untilEnded(worker, posted.body.worker_job_id, { headers: auth });
    const env = { LORA_WORKER_URL: worker.url, LORA_WORKER_TOKEN: TOKEN_A };

    const [status, json] = await Promise.all([runCli(process.execPath, [MAIN, "status", final.worker_job_id], env), runCli(process.execPath, [MAIN, "status", final.worker_job_id, "--json"], env)]);
    expect([status.exitCode, status.stderr]).toEqual([0, ""]);
    const url = (i: number) => `${worker.url}${final.samples[i].url}`;
    const names = ["portrait", "portrait/class", "full_body", "full_body/class"];
    const rows = ALL_STEPS.toReversed().map((step, i) => `${i === 0 ? "samples  " : "         "}step ${step}: ${names.map((n, j) => `${n} ${url(4 * i + j)}`).join(", ")}`);
    // Then the likeness verdict: this worker has no face scorer.
    expect(status.stdout).toContain(`\n${rows.join("\n")}\nverdict  not_scored: scorer missing\nsucceeded after `);
    expect(status.stdout).toContain(", seed 42, 2 sample prompts with and without the trigger\n");
    expect(JSON.parse(json.stdout)).toEqual(final);

    const printed = /^samples {2}step 100: portrait (\S+),/m.exec(status.stdout)![1]!;
    const image = await fetch(printed, { headers: auth });
    expect([image.status, image.headers.get("content-type"), (await image.bytes()).length]).toEqual([200, "image/png", final.samples[0].bytes]);
    const refused = await fetch(printed);
    expect([refused.status, refused.headers.get("content-type")]).toEqual([401, "application/json"]);
  });
});

function text(selector: string): string {
  return `(document.querySelector(${JSON.stringify(selector)})?.textContent ?? null)`;
}
