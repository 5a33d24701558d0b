import { describe, expect, setDefaultTimeout, test } from "bun:test";
import { inProcessApp } from "../support/app-harness.ts";
import { makeHostTree } from "../support/host-tree.ts";
import { parseExposition } from "../support/prometheus-format.ts";
import { SIMULATOR, simulateModeConfig } from "../support/real-mode.ts";
import { waitFor } from "../support/wait.ts";

setDefaultTimeout(60_000);

describe("GET /metrics", () => {
  test("is valid Prometheus text with jobs, the active job, GPUs and HTTP traffic", async () => {
    using tree = makeHostTree();
    await using a = inProcessApp(tree, simulateModeConfig(tree, { seconds_per_step: 0.02 }), SIMULATOR);
    const id = (await a.json("/train", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(tree.validRequest()) })).body.worker_job_id;
    await waitFor(async () => (await a.json(`/train/${id}`)).body.step > 2, "a few steps");
    await a.app.request("/train/not-a-job");

    const res = await a.app.request("/metrics");
    expect(res.headers.get("content-type")).toBe("text/plain; version=0.0.4; charset=utf-8");
    const { samples, errors } = parseExposition(await res.text());
    expect(errors).toEqual([]);
    const value = (name: string, labels: Record<string, string> = {}) =>
      samples.find((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v))?.value;
    expect(value("lora_worker_jobs", { status: "training" })).toBe(1);
    expect(value("lora_worker_active_job_step", { job_id: id })).toBeGreaterThan(2);
    expect(value("lora_worker_active_job_total_steps", { job_id: id })).toBe(400);
    expect(value("lora_worker_gpu_memory_free_mib", { index: "1" })).toBe(48669);
    expect(value("lora_worker_gpu_cotenant_present", { index: "0" })).toBe(0);
    expect(value("lora_worker_http_requests_total", { method: "GET", route: "/train/:id", status: "200" })).toBeGreaterThan(0);
    expect(value("lora_worker_http_requests_total", { method: "GET", route: "/train/:id", status: "404" })).toBe(1);
    expect(value("lora_worker_http_request_duration_seconds_count", { route: "/train/:id" })).toBeGreaterThan(1);
    await a.supervisor.cancel(id);
  });
});

describe("failures by error_code", () => {
  const failedTotal = async (app: { request: (path: string) => Response | Promise<Response> }) => {
    const { samples } = parseExposition(await (await app.request("/metrics")).text());
    const series = samples.filter((s) => s.name === "lora_worker_jobs_failed_total");
    return Object.fromEntries(series.map((s): [string, number] => [s.labels.error_code!, s.value]));
  };

  test("counts each failed job under its error_code, not a cancelled one, and the count outlives a restart", async () => {
    using tree = makeHostTree();
    const config = simulateModeConfig(tree, { seconds_per_step: 0, fail: "oom@3" });
    const post = (a: ReturnType<typeof inProcessApp>, name: string) =>
      a.json("/train", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(tree.validRequest({ output_name: name })) });
    const ended = (a: ReturnType<typeof inProcessApp>, id: string) =>
      waitFor(async () => ["failed", "cancelled", "succeeded"].includes((await a.json(`/train/${id}`)).body.status), `job ${id} to end`);
    {
      await using a = inProcessApp(tree, config, SIMULATOR);
      expect((await failedTotal(a.app)).cuda_oom).toBe(0);
      const failed = (await post(a, "one")).body.worker_job_id;
      await ended(a, failed);
      const counted = await failedTotal(a.app);
      expect(counted.cuda_oom).toBe(1);
      // Every code has its series, at 0 until one fails.
      expect(Object.keys(counted)).toContain("tokenizer_missing");
      expect(Object.entries(counted).filter(([code]) => code !== "cuda_oom").every(([, n]) => n === 0)).toBe(true);
    }
    // Contrast: a cancelled job is not a failure.
    await using a = inProcessApp(tree, { ...config, simulate: { ...config.simulate, fail: "hang@2" } }, SIMULATOR);
    expect((await failedTotal(a.app)).cuda_oom).toBe(1);
    const cancelled = (await post(a, "two")).body.worker_job_id;
    await a.supervisor.cancel(cancelled);
    await ended(a, cancelled);
    expect((await failedTotal(a.app)).cuda_oom).toBe(1);
    expect(Object.values(await failedTotal(a.app)).reduce((sum, n) => sum + n, 0)).toBe(1);
  });
});

describe("paused and resumable jobs", () => {
  test("a paused job counts as paused and resumable, a plain cancel as neither; its resume leaves it neither", async () => {
    using tree = makeHostTree();
    await using a = inProcessApp(tree, simulateModeConfig(tree, { seconds_per_step: 0.005 }), SIMULATOR);
    const gauges = async () => {
      const { samples } = parseExposition(await (await a.app.request("/metrics")).text());
      const value = (name: string) => samples.find((s) => s.name === name)?.value;
      return { paused: value("lora_worker_jobs_paused"), resumable: value("lora_worker_jobs_resumable"), cancelled: samples.find((s) => s.name === "lora_worker_jobs" && s.labels.status === "cancelled")?.value };
    };
    const post = async (name: string) => (await a.json("/train", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(tree.validRequest({ output_name: name })) })).body.worker_job_id as string;
    expect(await gauges()).toEqual({ paused: 0, resumable: 0, cancelled: 0 });

    // Contrast: a cancel before any state is cancelled, and neither paused nor resumable.
    await a.supervisor.cancel(await post("cancelled"));
    expect(await gauges()).toEqual({ paused: 0, resumable: 0, cancelled: 1 });

    const paused = await post("paused");
    await waitFor(async () => (await a.json(`/train/${paused}`)).body.step > 0, "a first step");
    expect((await a.json(`/train/${paused}/pause`, { method: "POST" })).body).toMatchObject({ paused: true, resumable: true });
    expect(await gauges()).toEqual({ paused: 1, resumable: 1, cancelled: 2 });

    const resumed = (await a.json(`/train/${paused}/resume`, { method: "POST" })).body.worker_job_id as string;
    expect(await gauges()).toEqual({ paused: 0, resumable: 0, cancelled: 2 });
    await a.supervisor.cancel(resumed);
  });
});

describe("the format checker", () => {
  const broken: Array<[string, string]> = [
    ["a sample before its TYPE", "lora_x 1\n# HELP lora_x x\n# TYPE lora_x gauge\n"],
    ["an unescaped quote in a label", '# HELP lora_x x\n# TYPE lora_x gauge\nlora_x{a="b"c"} 1\n'],
    ["buckets that shrink", '# HELP h x\n# TYPE h histogram\nh_bucket{le="1"} 5\nh_bucket{le="+Inf"} 4\nh_sum 1\nh_count 4\n'],
    ["a duplicate series", "# HELP g x\n# TYPE g gauge\ng 1\ng 2\n"],
    ["no final newline", "# HELP g x\n# TYPE g gauge\ng 1"],
  ];
  for (const [what, text] of broken) {
    test(`rejects ${what}`, () => {
      expect(parseExposition(text).errors.length).toBeGreaterThan(0);
    });
  }
});
