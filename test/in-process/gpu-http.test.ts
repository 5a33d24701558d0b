import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import { inProcessApp } from "../support/app-harness.ts";
import { fakeNvidiaSmi } from "../support/fake-nvidia-smi.ts";
import { makeHostTree } from "../support/host-tree.ts";
import { TRAINERS, realModeConfig } from "../support/real-mode.ts";

describe("/gpu-status over HTTP", () => {
  test("500 concurrent requests start one probe run: two nvidia-smi processes", async () => {
    using tree = makeHostTree();
    const fake = fakeNvidiaSmi(tree.root, "two-gpus-tts");
    const trainer = join(TRAINERS, "exit-zero-without-file.sh");
    await using a = inProcessApp(tree, realModeConfig(tree, trainer, { gpu: { nvidia_smi: fake.path } }), [trainer], { nvidiaSmi: fake.path });
    const statuses = await Promise.all(Array.from({ length: 500 }, async () => (await a.app.request("/gpu-status")).status));
    expect(new Set(statuses)).toEqual(new Set([200]));
    expect(fake.invocations().length).toBe(2);
  });

  test("a hanging nvidia-smi delays neither /healthz nor GET /train/{id}", async () => {
    using tree = makeHostTree();
    const hung = fakeNvidiaSmi(tree.root, "hung-driver");
    const trainer = join(TRAINERS, "exit-zero-without-file.sh");
    await using a = inProcessApp(tree, realModeConfig(tree, trainer, { gpu: { admission: "off" } }), [trainer], { nvidiaSmi: hung.path });
    const id = (await a.json("/train", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(tree.validRequest()) })).body.worker_job_id;
    let gpuAnswered = false;
    const gpu = Promise.resolve(a.app.request("/gpu-status")).then((r) => {
      gpuAnswered = true;
      return r.status;
    });
    const [health, job] = await Promise.all([a.json("/healthz"), a.json(`/train/${id}`)]);
    expect([health.status, job.status, gpuAnswered]).toEqual([200, 200, false]);
    expect(await gpu).toBe(503);
  });
});
