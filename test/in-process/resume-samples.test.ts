import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import { inProcessApp } from "../support/app-harness.ts";
import { MAIN, makeHostTree, type HostTree } from "../support/host-tree.ts";
import { SIMULATOR, simulateModeConfig } from "../support/real-mode.ts";
import { untilEnded } from "../support/jobs.ts";

// POST /train/{id}/resume with {"samples": N}: after a run ran out of memory taking its previews, a resume that
// takes none goes on past that checkpoint; one that takes them again fails there again.
const TIMEOUT_MS = 60_000;

function appFor(tree: HostTree) {
  // The GPU runs out of memory drawing the previews of step 200 (a fast run's second point); step 100's were drawn,
  // and the state of step 175 saved (every 25 steps with previews).
  const a = inProcessApp(tree, simulateModeConfig(tree, { seconds_per_step: 0, fail: "sample-oom@200" }), SIMULATOR);
  const post = (path: string, body?: string, type = "application/json") =>
    a.json(path, { method: "POST", ...(body === undefined ? {} : { body, headers: { "content-type": type } }) });
  const ended = (id: string) => untilEnded(a, id, 15_000);
  const failedWhileSampling = async (name: string) => {
    const { body } = await post("/train", JSON.stringify(tree.validRequest({ output_name: name, samples: 2 })));
    const failed = await ended(body.worker_job_id);
    expect(failed).toMatchObject({ status: "failed", error_code: "cuda_oom", resume_step: 175, resumable: true });
    return failed.worker_job_id as string;
  };
  const argvOf = async (id: string): Promise<string[]> => (await Bun.file(join(tree.state, "jobs", id, "launch.json")).json()).argv;
  return { ...a, post, ended, failedWhileSampling, argvOf };
}

describe("resume with other previews", () => {
  test("a resume asking for no samples leaves the sampling flags out and goes on past the checkpoint that failed", async () => {
    using tree = makeHostTree();
    await using a = appFor(tree);
    const failed = await a.failedWhileSampling("without");
    const resumed = await a.post(`/train/${failed}/resume`, JSON.stringify({ samples: 0 }));
    expect(resumed).toEqual({ status: 200, body: { worker_job_id: expect.any(String), status: "starting", resumed_from: failed, resume_step: 175 } });
    const final = await a.ended(resumed.body.worker_job_id);
    expect(final).toMatchObject({ status: "succeeded", step: 400, request: { samples: 0, output_name: "without" } });
    const [before, after] = [await a.argvOf(failed), await a.argvOf(resumed.body.worker_job_id)];
    // Only the sampling flags differ (and the resume's own), and the save cadence they set (25 steps, 40 without).
    const sampling = (flag: string) => flag.startsWith("--sample_") || /^--save_(every|last)_n_steps(_state)?=/.test(flag);
    expect(before.filter(sampling)).toHaveLength(6);
    expect(after.filter(sampling)).toEqual(["--save_every_n_steps=40", "--save_last_n_steps=39", "--save_last_n_steps_state=39"]);
    const common = (argv: string[]) => argv.filter((f) => !sampling(f) && !f.startsWith("--resume") && f !== "--skip_until_initial_step");
    expect(common(after).map((f) => f.replace(resumed.body.worker_job_id, "<id>"))).toEqual(common(before).map((f) => f.replace(failed, "<id>")));
  }, TIMEOUT_MS);

  test("contrast: a resume without a body takes the previews again and fails at the same checkpoint", async () => {
    using tree = makeHostTree();
    await using a = appFor(tree);
    const failed = await a.failedWhileSampling("again");
    const resumed = await a.post(`/train/${failed}/resume`);
    expect(resumed.status).toBe(200);
    const final = await a.ended(resumed.body.worker_job_id);
    expect(final).toMatchObject({ status: "failed", error_code: "cuda_oom", request: { samples: 2 } });
    expect(final.error).toContain("while taking preview samples");
  }, TIMEOUT_MS);

  test("a body with samples out of range, another field or another type is refused, and no job starts", async () => {
    using tree = makeHostTree();
    await using a = appFor(tree);
    const failed = await a.failedWhileSampling("refused");
    const cases: Array<[string, string, number, unknown]> = [
      [JSON.stringify({ samples: 5 }), "application/json", 422, [{ loc: ["body", "samples"], msg: "must be at most 4", type: "too_big" }]],
      [JSON.stringify({ samples: 0, tier: "fast" }), "application/json", 422, [{ loc: ["body", "tier"], msg: expect.any(String), type: "extra_forbidden" }]],
      ["samples=0", "text/plain", 415, expect.stringContaining("Content-Type must be application/json")],
    ];
    for (const [body, type, status, detail] of cases) {
      expect(await a.post(`/train/${failed}/resume`, body, type)).toEqual({ status, body: { detail } });
    }
    const { body } = await a.json("/train?limit=10");
    expect(body.jobs.map((j: any) => j.worker_job_id)).toEqual([failed]);
  }, TIMEOUT_MS);

  test("lora-worker resume --samples 0 asks for it; a count past 4 is a usage error that reaches no worker", async () => {
    using tree = makeHostTree();
    await using a = appFor(tree);
    const failed = await a.failedWhileSampling("cli");
    using server = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: a.app.fetch });
    const cli = async (...args: string[]) => {
      const proc = Bun.spawn([process.execPath, MAIN, "resume", failed, "--url", server.url.origin, ...args], {
        stdout: "pipe", stderr: "pipe", env: { PATH: process.env.PATH! },
      });
      const [code, out, err] = await Promise.all([proc.exited, new Response(proc.stdout).text(), new Response(proc.stderr).text()]);
      return { code, out, err };
    };
    const refused = await cli("--samples", "9");
    expect(refused.code).toBe(2);
    expect(refused.err).toStartWith('lora-worker resume: --samples must be 0 to 4 preview images, got "9"');
    const ran = await cli("--samples", "0", "--json");
    expect(ran.code).toBe(0);
    const id = JSON.parse(ran.out).worker_job_id;
    expect(await a.ended(id)).toMatchObject({ status: "succeeded", request: { samples: 0 } });
  }, TIMEOUT_MS);
});
