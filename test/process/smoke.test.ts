import { describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, symlinkSync } from "node:fs";
import { join } from "node:path";
import { SMOKE_FOLDER } from "../../src/smoke/dataset.ts";
import { inProcessApp } from "../support/app-harness.ts";
import { likenessTable, SCORER_TEST_MS } from "../support/face-scorer.ts";
import { makeHostTree, MAIN, SIMULATE_TABLES, type HostTree } from "../support/host-tree.ts";
import { SIMULATOR, simulateModeConfig } from "../support/real-mode.ts";
import { startWorker } from "../support/worker-process.ts";
import { waitFor } from "../support/wait.ts";
import { writeTokenizers } from "../support/tokenizers.ts";
import { writeCheckpoint, CHECKPOINT_KEYS } from "../support/checkpoints.ts";

const TIMEOUT_MS = 60_000;
const smokeFolders = (tree: HostTree) => {
  const root = join(tree.handoff, SMOKE_FOLDER);
  return existsSync(root) ? readdirSync(root) : [];
};

async function smokeCli(url: string, args: string[]) {
  const proc = Bun.spawn([process.execPath, MAIN, "smoke", "--url", url, ...args], {
    stdout: "pipe", stderr: "pipe", env: { PATH: process.env.PATH! },
  });
  const [exitCode, stdout, stderr] = await Promise.all([proc.exited, new Response(proc.stdout).text(), new Response(proc.stderr).text()]);
  return { exitCode, lines: stdout.trimEnd().split("\n"), stderr };
}

// `simulate`: more keys of the [simulate] table. At 0.2 s a step the pause lands on the state at step 2 even on a
// loaded machine, as it does at any GPU's pace; much faster, the run can be a save or two further on first.
const smokeConfig = (tree: HostTree, simulate = "", secondsPerStep = 0.2, more = "") => {
  const tables = SIMULATE_TABLES(secondsPerStep).replace("[simulate]\n", `[simulate]\n${simulate}`);
  return tree.writeConfig(`${tables}[smoke]\nbase_model = ${JSON.stringify(tree.model)}\n${more}`);
};

describe("lora-worker smoke against a running worker", () => {
  test("pauses the run at its first state, resumes it, checks the LoRA and the preview, and removes its folder", async () => {
    using tree = makeHostTree();
    // CLIP's own tokenizers, so the worker counts the captions' tokens exactly (without them it bounds them from above).
    writeTokenizers(join(tree.state, "tokenizers"));
    // The real face scorer: the smoke dataset's two photos of a face give it an identity; the simulator's previews
    // are one colour, as the real trainer's random weights draw.
    await using worker = await startWorker(smokeConfig(tree, "", 0.2, likenessTable()));
    const { exitCode, lines, stderr } = await smokeCli(worker.url, ["--device", "1"]);
    expect(stderr).toBe("");
    expect(lines.map((l) => l.split(/\s+/).slice(0, 2).join(" "))).toEqual([
      "PASS dispatch", "PASS pause", "PASS resume", "PASS lora", "PASS sample", "PASS likeness", "PASS clean", "smoke: passed",
    ]);
    expect(lines[0]).toContain("on device 1");
    expect(lines[0]).toContain("SIMULATED trainer");
    expect(lines[1]).toContain("paused at its first saved state, step 2");
    expect(lines[2]).toMatch(/went on from step 2 to 6 and succeeded/);
    expect(lines[5]).toMatch(/^PASS likeness +\S+ +not_scored: no face in previews \(\d points? scored\); the dataset's faces: 2 photos with one face, 2 with none, 0 with several; spread 0\.\d+ \(a match is at most 0\.6\)$/);
    expect(exitCode).toBe(0);
    expect(smokeFolders(tree)).toEqual([]);
    // Both runs stay in the history as jobs of tier smoke: the first paused and resumed since (paused no longer: its
    // successor is named), the successor succeeded.
    const { body } = await worker.json("/train?limit=5");
    expect(body.jobs.map((j: any) => [j.request.tier, j.status, j.paused, j.resumed_by ?? null])).toEqual([
      ["smoke", "succeeded", false, null],
      ["smoke", "cancelled", false, body.jobs[0].worker_job_id],
    ]);
    // Its one caption of about 100 tokens makes the run train on the 150-token context, as the record says and the
    // launch passes (a short-caption dataset passes no flag: token-window.test.ts).
    const first = body.jobs[1];
    expect(first.dataset.prepared.token_window).toMatchObject({ tokens: 150, longest: { caption: "smoke-3.txt" } });
    const launch = JSON.parse(readFileSync(join(tree.state, "jobs", first.worker_job_id, "launch.json"), "utf8"));
    expect(launch.argv).toContain("--max_token_length=150");
  }, SCORER_TEST_MS);

  test("a smoke run whose training fails says why on the failing stage, exits 1 and still removes its folder", async () => {
    using tree = makeHostTree();
    // Slow enough that the pause at step 2 lands before step 5, where the resumed run runs out of memory.
    await using worker = await startWorker(smokeConfig(tree, 'fail = "oom@5"\n', 0.2));
    const { exitCode, lines } = await smokeCli(worker.url, ["--device", "0"]);
    expect(lines.map((l) => l.split(/\s+/).slice(0, 2).join(" "))).toEqual([
      "PASS dispatch", "PASS pause", "FAIL resume", "SKIP lora", "SKIP sample", "SKIP likeness", "PASS clean", "smoke: FAILED",
    ]);
    expect(lines[2]).toContain("failed");
    expect(lines[2]).toContain("cuda_oom");
    expect(exitCode).toBe(1);
    expect(smokeFolders(tree)).toEqual([]);
  }, TIMEOUT_MS);
});

describe("lora-worker smoke when arbo lays a link over the smoke folder mid-run", () => {
  test("the publish refuses to write through it and the clean stage removes nothing through it", async () => {
    using tree = makeHostTree();
    // At 0.5 s a step the resumed run trains its 4 steps for 2 s: time enough to lay the link before it publishes.
    await using worker = await startWorker(smokeConfig(tree, "", 0.5));
    const cli = smokeCli(worker.url, ["--device", "1"]);
    // Once the resumed run trains, the folder moves out of the root and a link takes its place.
    const resumedTrains = async () => {
      const [job] = (await worker.json("/train?limit=1")).body.jobs;
      return (job?.resumed_from ?? null) !== null && job.phase === "training";
    };
    await waitFor(resumedTrains, "the resumed run to train", 30_000);
    const run = smokeFolders(tree)[0]!;
    const outside = join(tree.root, "outside");
    renameSync(join(tree.handoff, SMOKE_FOLDER), outside);
    symlinkSync(outside, join(tree.handoff, SMOKE_FOLDER));
    const { exitCode, lines } = await cli;
    expect(lines.map((l) => l.split(/\s+/).slice(0, 2).join(" "))).toEqual([
      "PASS dispatch", "PASS pause", "FAIL resume", "SKIP lora", "SKIP sample", "SKIP likeness", "FAIL clean", "smoke: FAILED",
    ]);
    expect(lines[2]).toContain("publish_failed");
    expect(lines[6]).toContain(`${SMOKE_FOLDER} is a symbolic link`);
    expect(exitCode).toBe(1);
    // Contrast: the run's folder, reachable through the link, is still there: nothing was removed through it.
    expect(readdirSync(outside)).toEqual([run]);
  }, TIMEOUT_MS);
});

describe("POST /smoke", () => {
  function appWith(tree: HostTree, smoke: Record<string, unknown> = { base_model: tree.model }, devices?: unknown[]) {
    // Slow enough that the pause lands on the state at step 2 on a loaded machine, as it would on any GPU.
    const config = simulateModeConfig(tree, { seconds_per_step: 0.2 }, {});
    const withSmoke = { ...config, smoke, ...(devices ? { devices } : {}) } as typeof config;
    const a = inProcessApp(tree, withSmoke, SIMULATOR);
    const smokePost = (body: unknown) =>
      a.json("/smoke", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
    return { ...a, smokePost };
  }

  test("while a job runs is 409 busy naming it, and writes nothing into the handoff root", async () => {
    using tree = makeHostTree();
    await using a = appWith(tree);
    const running = await a.post(JSON.stringify(tree.validRequest()));
    const { worker_job_id: active } = (await running.json()) as any;
    const answer = await a.smokePost({ device_index: 0 });
    expect(answer).toEqual({ status: 409, body: { detail: expect.any(String), reason: "busy", active_job_id: active } });
    expect(smokeFolders(tree)).toEqual([]);
    await a.app.request(`/train/${active}/cancel`, { method: "POST" });
  }, TIMEOUT_MS);

  test("a smoke folder replaced by a link out of the handoff root is 409 smoke_unavailable; nothing is written through it", async () => {
    using tree = makeHostTree();
    const outside = join(tree.root, "outside");
    mkdirSync(outside);
    symlinkSync(outside, join(tree.handoff, SMOKE_FOLDER));
    await using a = appWith(tree);
    const answer = await a.smokePost({ device_index: 0 });
    expect(answer).toEqual({ status: 409, body: {
      reason: "smoke_unavailable",
      detail: `the smoke run's folder cannot be used: ${SMOKE_FOLDER} in the handoff root is a symbolic link, not a folder the worker made`,
    } });
    expect(readdirSync(outside)).toEqual([]);
    // Contrast: the link gone, the same worker writes its run's folder and claims the run.
    rmSync(join(tree.handoff, SMOKE_FOLDER));
    const ran = await a.smokePost({ device_index: 0 });
    expect(ran.status).toBe(200);
    expect(smokeFolders(tree)).toHaveLength(1);
    await a.app.request(`/train/${ran.body.worker_job_id}/cancel`, { method: "POST" });
  }, TIMEOUT_MS);

  test("without smoke.base_model is 409 smoke_unavailable, naming the key to set", async () => {
    using tree = makeHostTree();
    await using a = appWith(tree, {});
    const answer = await a.smokePost({ device_index: 0 });
    expect(answer.status).toBe(409);
    expect(answer.body.reason).toBe("smoke_unavailable");
    expect(answer.body.detail).toContain("set smoke.base_model in the config");
    expect(smokeFolders(tree)).toEqual([]);
  });

  test("a device that is not configured, or none where several are, is a 422 on device_index", async () => {
    using tree = makeHostTree();
    await using a = appWith(tree);
    for (const [body, type] of [[{ device_index: 7 }, "unknown_device"], [{}, "missing"]] as const) {
      const answer = await a.smokePost(body);
      expect(answer.status).toBe(422);
      expect(answer.body.detail).toEqual([{ loc: ["body", "device_index"], msg: expect.any(String), type }]);
    }
    const extra = await a.smokePost({ device_index: 0, tier: "fast" });
    expect(extra.body.detail).toEqual([{ loc: ["body", "tier"], msg: expect.any(String), type: "extra_forbidden" }]);
    expect(smokeFolders(tree)).toEqual([]);
  });

  test("with one device configured, the device may be left out", async () => {
    using tree = makeHostTree();
    await using a = appWith(tree, { base_model: tree.model }, [{ index: 1, name: "RTX A6000", class: "48gb" }]);
    const answer = await a.smokePost({});
    expect(answer.status).toBe(200);
    await waitFor(async () => (await a.json(`/train/${answer.body.worker_job_id}`)).body.status === "cancelled", "the smoke run to pause");
    const { body } = await a.json(`/train/${answer.body.worker_job_id}`);
    expect(body).toMatchObject({ paused: true, resume_step: 2, request: { tier: "smoke", device_index: 1, samples: 1 } });
  }, TIMEOUT_MS);

  test("a base model that is not SDXL is refused by the same checks as any request's", async () => {
    using tree = makeHostTree();
    const sd15 = writeCheckpoint(join(tree.models, "sd15.safetensors"), CHECKPOINT_KEYS.sd15);
    await using a = appWith(tree, { base_model: sd15 });
    const answer = await a.smokePost({ device_index: 0 });
    expect(answer.status).toBe(422);
    expect(answer.body.detail[0].loc).toEqual(["body", "base_model_path"]);
    expect(smokeFolders(tree)).toEqual([]);
  });

  test("contrast: arbo's POST /train cannot name the smoke tier", async () => {
    using tree = makeHostTree();
    await using a = appWith(tree);
    const res = await a.post(JSON.stringify(tree.validRequest({ tier: "smoke" })));
    expect(res.status).toBe(422);
    expect(((await res.json()) as any).detail).toEqual([
      { loc: ["body", "tier"], msg: 'must be one of "fast", "balanced", "quality"', type: "enum" },
    ]);
  });
});
