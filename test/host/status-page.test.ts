import { beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { TOKEN_A, writeTokens } from "../support/auth-setup.ts";
import { ensureBinary } from "../support/binary.ts";
import { chromiumForTests, type Page } from "../support/chromium.ts";
import { REPO, SIMULATE_TABLES, makeHostTree } from "../support/host-tree.ts";
import { HOSTILE_NAME, OVERFLOWS, TTS, gpuScenario, openStatusPage as openOn, saveScreenshot } from "../support/status-page.ts";
import { startWorker, type WorkerProcess } from "../support/worker-process.ts";
import { claimedPng, cornersPng, jpegWithOrientation } from "../support/exif.ts";

// The compiled worker runs a simulated job; the page runs in a real headless Chromium. Screenshots are
// kept (overwritten on each run) where a person can look at them.
setDefaultTimeout(60_000);

const PAGE_HTML = readFileSync(join(REPO, "src/api/status-page.html"), "utf8");

// Expressions evaluated in the page.
const STEP_SHOWN = `Number(/step (\\d+) \\/ 400/.exec(document.getElementById("job-step").textContent)?.[1] ?? 0)`;
const text = (selector: string) => `(document.querySelector(${JSON.stringify(selector)})?.textContent ?? null)`;
const GPU_CARDS = `[...document.querySelectorAll("#gpus .gpu")].map((g) => ({
  head: [...g.querySelector(".gpu-head").children].map((c) => c.textContent).filter(Boolean),
  processes: [...g.querySelectorAll(".procs li")].map((li) => ({ role: li.className, name: li.querySelector(".pname").textContent })),
}))`;
const PROGRESS_BAR = `(() => {
  const bar = document.getElementById("job-progress");
  return { now: Number(bar.getAttribute("aria-valuenow")), max: Number(bar.getAttribute("aria-valuemax")), width: bar.firstElementChild.getBoundingClientRect().width };
})()`;
const jobRow = (id: string) => `(document.querySelector('#jobs tr[data-id="${id}"]')?.textContent ?? null)`;

// Feeds the page's own SSE parser chunks cut mid-line, mid-CRLF and mid-event.
const PARSE_CHUNKS = `(() => {
  const events = [];
  const feed = createSseParser((event) => events.push(event));
  for (const chunk of ["id: 1\\r", "\\nevent: job\\r\\ndata: {\\"step\\":", "1}\\r\\n\\r\\n: heartbeat\\n\\n", "data: one\\ndata: two\\n\\nid: 7\\nevent: end\\ndata: x\\n", "\\n"]) feed(chunk);
  return events;
})()`;
// Records each event stream the page opens (the Last-Event-ID it sent, the ids it got) and cuts the first
// after three events, as a dropped connection would; then has the page follow its job afresh.
const CUT_FIRST_STREAM = `(() => {
  window.__eventStreams = [];
  const realFetch = window.fetch.bind(window);
  window.fetch = async (input, init = {}) => {
    const res = await realFetch(input, init);
    if (!String(input).endsWith("/events")) return res;
    const stream = { lastEventId: new Headers(init.headers).get("Last-Event-ID"), ids: [] };
    const cut = window.__eventStreams.push(stream) === 1;
    const reader = res.body.getReader();
    let seen = "";
    const body = new ReadableStream({
      async pull(controller) {
        const { value, done } = await reader.read();
        if (done) return controller.close();
        seen += new TextDecoder().decode(value);
        stream.ids = [...seen.matchAll(/^id: (\\d+)$/gm)].map((m) => Number(m[1]));
        controller.enqueue(value);
        if (cut && stream.ids.length >= 3) {
          reader.cancel();
          controller.error(new TypeError("connection cut by the test"));
        }
      },
    });
    return new Response(body, { status: res.status, headers: res.headers });
  };
  focus(state.focusId);
})()`;

let binary: string;
beforeAll(() => {
  binary = ensureBinary();
}, 120_000);
const browser = chromiumForTests();

const openStatusPage = (worker: WorkerProcess) => openOn(browser, worker);

async function expectStreamResumed(page: Page): Promise<void> {
  const streams = await page.until<Array<{ lastEventId: string | null; ids: number[] }>>(
    `window.__eventStreams.length >= 2 && window.__eventStreams[1].ids.length > 0 && window.__eventStreams`, "the page to reconnect and get events");
  expect(streams[0]!.lastEventId).toBeNull();
  expect(streams[0]!.ids).toContain(Number(streams[1]!.lastEventId));
  // The worker counts on from the id the page resumed with.
  expect(streams[1]!.ids[0]).toBe(Number(streams[1]!.lastEventId) + 1);
  expect(await page.evaluate(PARSE_CHUNKS)).toEqual([
    { id: "1", type: "job", data: '{"step":1}' },
    { id: "1", type: "message", data: "one\ntwo" },
    { id: "7", type: "end", data: "x" },
  ]);
}

describe("the status page of the compiled binary, in headless Chromium", () => {
  test("GET / is the embedded page byte for byte, self-contained, with a policy that runs only its own inline script and style", async () => {
    using tree = makeHostTree();
    await using worker = await startWorker(tree.writeConfig(SIMULATE_TABLES(0.02)), { command: [binary] });
    const res = await worker.request("/");
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("text/html; charset=UTF-8");
    expect(res.headers.get("content-security-policy")).toMatch(/^default-src 'none'; script-src 'sha256-[A-Za-z0-9+/]+=*'; style-src 'sha256-[A-Za-z0-9+/]+=*'; connect-src 'self';/);
    expect(await res.text()).toBe(PAGE_HTML);
    expect(PAGE_HTML).not.toMatch(/<script[^>]+src|<link[^>]+stylesheet|https?:\/\/(?!www\.w3\.org\/2000\/svg)/);
  });

  test("a running simulated job shows rising progress and a loss curve, the GPUs with the co-tenant marked, and the job in the list, live through a dropped event stream until it succeeds", async () => {
    using tree = makeHostTree();
    // 400 steps at 0.05 s: long enough to watch the bar move on a loaded machine.
    await using worker = await startWorker(tree.writeConfig(SIMULATE_TABLES(0.05)), { command: [binary], env: { FAKE_NVIDIA_SMI_SCENARIO: gpuScenario(tree) } });
    const id = (await worker.postTrain(tree.validRequest())).body.worker_job_id as string;
    const page = await openStatusPage(worker);

    const seen = await page.until<number>(STEP_SHOWN, "the page to show a step");
    await page.until(`${STEP_SHOWN} > ${seen}`, `the step shown to rise past ${seen}`);
    await page.evaluate(CUT_FIRST_STREAM);
    // One look at the count and the path: the stream just cut, the page may draw the curve again between two looks.
    const curve = `Number(document.getElementById("loss-curve").dataset.points) >= 2 && ` +
      `document.querySelector("#loss-curve path.raw")?.getAttribute("d")`;
    expect(await page.until<string>(curve, "the loss curve to have points")).toMatch(/^M[\d.]+,[\d.]+(L[\d.]+,[\d.]+)+/);
    const bar = await page.evaluate<{ now: number; max: number; width: number }>(PROGRESS_BAR);
    expect(bar.max).toBe(400);
    expect(bar.now).toBeGreaterThan(0);
    expect(bar.width).toBeGreaterThan(0);
    expect(await page.evaluate(text("#job-title"))).toBe("Active job");
    expect(await page.evaluate(text("#job-id"))).toBe(id);
    expect(await page.evaluate(text("#trainer-mode"))).toBe("SIMULATED");
    expect(await page.evaluate(`document.getElementById("simulated-banner").hidden`)).toBe(false);
    expect(await page.evaluate(text("#auth-mode"))).toBe("auth: off (loopback only)");
    expect(await page.evaluate(`document.getElementById("token-dialog").open`)).toBe(false);

    const gpus = await page.until<Array<{ head: string[]; processes: unknown[] }>>(`(${GPU_CARDS}).length === 2 && ${GPU_CARDS}`, "the GPU panel to show two devices");
    expect(gpus).toEqual([
      { head: ["GPU 0", "NVIDIA GeForce RTX 3090", "co-tenant"], processes: [{ role: "role-cotenant", name: TTS }] },
      { head: ["GPU 1", "NVIDIA RTX A6000"], processes: [{ role: "role-other", name: HOSTILE_NAME }] },
    ]);
    // The markup in a process name stayed text: no element was made of it and its handler never ran.
    expect(await page.evaluate(`[document.querySelectorAll("#gpus img").length, window.__pwned ?? null]`)).toEqual([0, null]);
    expect(await page.until<string>(jobRow(id), "the job in the recent list")).toContain("mylora");
    expect(await page.evaluate(OVERFLOWS)).toEqual([]);
    await saveScreenshot(page, "running-job");

    await expectStreamResumed(page);

    await page.until(`document.getElementById("job-status").textContent === "succeeded"`, "the card to show the job succeeded", 45_000);
    expect(await page.evaluate(`[${text("#job-title")}, ${text("#job-step")}]`)).toEqual(["Last job", "step 400 / 400"]);
    expect(await page.until<string>(`${jobRow(id)}?.includes("succeeded") && ${jobRow(id)}`, "the list to show the job succeeded")).toContain("LoRA");
    expect(await page.evaluate("window.__eventStreams.length")).toBe(2);
    await saveScreenshot(page, "succeeded-job");
    expect(page.errors).toEqual([]);
  }, 90_000);

  test("behind a token the page asks for it, asks again after a wrong one, shows the data once it has the right one, and keeps it for the tab", async () => {
    using tree = makeHostTree();
    const tokenFile = writeTokens(join(tree.root, "etc"), [TOKEN_A]);
    // A slow job, still running when the test cancels it.
    const config = tree.writeConfig(`${SIMULATE_TABLES(0.2)}[auth]\ntoken_file = ${JSON.stringify(tokenFile)}\n`);
    await using worker = await startWorker(config, { command: [binary] });
    const auth = { authorization: `Bearer ${TOKEN_A}` };
    const dispatched = await worker.json("/train", { method: "POST", headers: { ...auth, "content-type": "application/json" }, body: JSON.stringify(tree.validRequest()) });
    const id = dispatched.body.worker_job_id as string;
    const page = await openStatusPage(worker);

    await page.until(`document.getElementById("token-dialog").open`, "the token form");
    expect(await page.evaluate(`document.querySelectorAll("#gpus .gpu, #jobs tbody tr").length`)).toBe(0);
    await saveScreenshot(page, "token-form");
    await page.focus("#token-input");
    await page.type("not-the-token-0000000000");
    await page.pressEnter();
    await page.until(`document.getElementById("token-dialog").open && !document.getElementById("token-error").hidden`, "the form to come back saying the token was refused");
    expect(await page.evaluate(text("#token-error"))).toContain("did not accept that token");
    await page.focus("#token-input");
    await page.type(TOKEN_A);
    await page.pressEnter();

    await page.until(`document.querySelectorAll("#gpus .gpu").length === 2`, "the GPU panel after the token");
    await page.until(jobRow(id), "the job in the recent list after the token");
    await page.until(STEP_SHOWN, "the job's progress after the token");
    expect(await page.evaluate(`[sessionStorage.getItem("lora-worker.token"), document.getElementById("token-dialog").open]`)).toEqual([TOKEN_A, false]);
    expect(await page.evaluate(text("#auth-mode"))).toBe("auth: token");
    await saveScreenshot(page, "after-token");

    await page.reload();
    await page.until(`document.querySelectorAll("#gpus .gpu").length === 2`, "the GPU panel after a reload");
    expect(await page.evaluate(`document.getElementById("token-dialog").open`)).toBe(false);
    expect((await worker.json(`/train/${id}/cancel`, { method: "POST", headers: auth })).body.status).toBe("cancelled");
  });

  test("a read-only token in the address's fragment opens the page without typing, leaves no trace in the address or the requests, and shows no button that acts", async () => {
    using tree = makeHostTree();
    const etc = join(tree.root, "etc");
    // A b64token may hold + and /: the address carries them encoded and the page decodes what it reads.
    const reader = "r3ad+Only/t0ken-5a7c9e1b3d2f=";
    const tokens = { token_file: writeTokens(etc, [TOKEN_A]), read_token_file: writeTokens(etc, [reader], "read-token") };
    const config = tree.writeConfig(`${SIMULATE_TABLES(0.2)}[auth]\n${Object.entries(tokens).map(([k, v]) => `${k} = ${JSON.stringify(v)}`).join("\n")}\n`);
    await using worker = await startWorker(config, { command: [binary] });
    const full = { authorization: `Bearer ${TOKEN_A}` };
    const id = (await worker.json("/train", { method: "POST", headers: { ...full, "content-type": "application/json" }, body: JSON.stringify(tree.validRequest()) })).body.worker_job_id as string;
    const page = await browser.open(`${worker.url}/#token=${encodeURIComponent(reader)}`);

    // The first answer that said the token only reads (the job list's) repaints the header, not the next health
    // poll 5 s later.
    await page.until(`!document.getElementById("jobs").hidden`, "the job list, read with the fragment's token");
    expect(await page.evaluate(text("#auth-mode"))).toBe("auth: token (read-only)");
    await page.until(STEP_SHOWN, "the running job's progress");
    expect(await page.evaluate(`[document.getElementById("token-dialog").open, location.href, sessionStorage.getItem("lora-worker.token")]`)).toEqual([false, `${worker.url}/`, reader]);
    // No request the page made carried the token in its address, and the worker never saw it.
    const addresses = await page.evaluate<string[]>(`[location.href, ...performance.getEntriesByType("resource").map((e) => e.name)]`);
    expect(addresses.length).toBeGreaterThan(3);
    expect(addresses.filter((a) => a.includes(reader) || a.includes(encodeURIComponent(reader)))).toEqual([]);
    expect(worker.output()).not.toContain(reader);
    // It reads everything, and acts on nothing: no Pause, no Cancel on the running job, and the header says why.
    await page.until(`document.querySelectorAll("#gpus .gpu").length === 2`, "the GPU panel");
    await page.until(`${text("#auth-mode")} === "auth: token (read-only)"`, "the header to say the token only reads");
    expect(await page.evaluate(`["job-pause", "job-cancel", "job-resume"].map((b) => document.getElementById(b).hidden)`)).toEqual([true, true, true]);
    expect(await page.evaluate(OVERFLOWS)).toEqual([]);
    await saveScreenshot(page, "read-only-token");

    // Contrast: the same page with the full token offers Pause and Cancel on the same job.
    const acting = await browser.open(`${worker.url}/#token=${TOKEN_A}`);
    await acting.until(`!document.getElementById("job-pause").hidden && !document.getElementById("job-cancel").hidden`, "Pause and Cancel with the full token");
    expect(await acting.evaluate(text("#auth-mode"))).toBe("auth: token");
    expect((await worker.json(`/train/${id}/cancel`, { method: "POST", headers: full })).body.status).toBe("cancelled");
    expect([...page.errors, ...acting.errors]).toEqual([]);
  });

  test("with no job and no GPU driver the page says so: an empty list and nvidia-smi's own words", async () => {
    using tree = makeHostTree();
    const noDriver = join(REPO, "test/fixtures/gpu/no-driver");
    await using worker = await startWorker(tree.writeConfig(SIMULATE_TABLES(0.02)), { command: [binary], env: { FAKE_NVIDIA_SMI_SCENARIO: noDriver } });
    const page = await openStatusPage(worker);
    const detail = (await worker.json("/gpu-status")).body.detail as string;
    expect(detail.length).toBeGreaterThan(0);

    const shown = await page.until<string>(`document.querySelector("#gpus .gpu-error")?.textContent`, "the GPU probe failure");
    expect(shown).toBe(`GPU probe failed${detail}`);
    await page.until(`!document.getElementById("jobs-empty").hidden && document.getElementById("jobs-empty").textContent.startsWith("No jobs yet")`, "the empty job list");
    expect(await page.evaluate(text("#job-empty"))).toStartWith("No job is training.");
    await saveScreenshot(page, "idle-no-driver");
    expect(page.errors).toEqual([]);
  });

  test("a job's card says what was done to its dataset copy: captions given the trigger, its context, photos turned upright, small and large images, per file, and whose faces they show", async () => {
    using tree = makeHostTree();
    writeFileSync(join(tree.dataset, "img0.txt"), "a man in a blue shirt");
    writeFileSync(join(tree.dataset, "img1.txt"), "ohwx, smiling");
    writeFileSync(join(tree.dataset, "phone.jpg"), await jpegWithOrientation(cornersPng(), 6));
    writeFileSync(join(tree.dataset, "big.png"), claimedPng(10_000, 10_000));
    await using worker = await startWorker(tree.writeConfig(SIMULATE_TABLES(0.002)), { command: [binary] });
    await worker.postTrain(tree.validRequest());
    const page = await openStatusPage(worker);
    await page.until(`document.getElementById("job-status").textContent === "succeeded"`, "the card to show the job succeeded", 45_000);
    const rows = await page.evaluate<string[]>(`[...document.querySelectorAll("#job-dataset span")].map((s) => s.textContent)`);
    expect(rows).toEqual([
      "Captions", "trigger added to 1 caption, already in 1, 3 images without one",
      // Counted by the bound (no tokenizer here): "ohwx person, a man in a blue shirt" but its spaces.
      "Context", "75 tokens (no --max_token_length): the longest caption, img0.txt, has 27",
      "Turned upright", "1 image: phone.jpg",
      // At the fast tier's 768: an 8x8 image goes to the 768x768 bucket, the 4x6 photo to 640x896.
      "Small", "4 images scaled up: img0.png (8×8, ×96), img1.png (8×8, ×96), img2.png (8×8, ×96), phone.jpg (4×6, ×160)",
      "Large", "1 image over Pillow's 89,478,485 pixels (it warns): big.png (10000×10000)",
      "Files", "big.png: no caption: trains on \"ohwx person\"; img0.png: small: scaled up 96x; img0.txt: trigger added " +
        "(\"ohwx person, \" in front); img1.png: small: scaled up 96x; img1.txt: caption kept; and 5 more",
      // The identity's own sentence, as the CLI prints it (no scorer on this host's config).
      "Faces", "not scored: no face scorer (lora-worker doctor's likeness line says how to add it); 0 photos with " +
        "one face, 0 with none, 0 with several",
    ]);
    expect(await page.evaluate(OVERFLOWS)).toEqual([]);
    await saveScreenshot(page, "prepared-dataset");
    expect(page.errors).toEqual([]);
  });
  test("a samples job's card shows its likeness report beside the previews: here, with no scorer, not scored and why", async () => {
    using tree = makeHostTree();
    await using worker = await startWorker(tree.writeConfig(SIMULATE_TABLES(0.002)), { command: [binary] });
    await worker.postTrain(tree.validRequest({ samples: 1 }));
    const page = await openStatusPage(worker);
    await page.until(`document.getElementById("job-status").textContent === "succeeded"`, "the card to show the job succeeded", 45_000);
    await page.until(`!document.getElementById("job-likeness").hidden`, "the likeness figure to show", 10_000);
    const caption = await page.evaluate<string>(text("#likeness-caption"));
    expect(caption).toContain("verdict: not_scored (scorer missing)");
    expect(caption).toContain("What to do: the reason says why");
    expect(await page.evaluate(`document.querySelector("#likeness-chart .threshold") !== null`)).toBe(true);
    expect(page.errors).toEqual([]);
  });

  test("contrast: a job without previews draws no likeness figure", async () => {
    using tree = makeHostTree();
    await using worker = await startWorker(tree.writeConfig(SIMULATE_TABLES(0.002)), { command: [binary] });
    await worker.postTrain(tree.validRequest());
    const page = await openStatusPage(worker);
    await page.until(`document.getElementById("job-status").textContent === "succeeded"`, "the card to show the job succeeded", 45_000);
    // Its record says no_previews, with no point to draw: the figure stays hidden.
    expect(await page.evaluate(`document.getElementById("job-likeness").hidden`)).toBe(true);
  });
});
