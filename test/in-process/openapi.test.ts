import { describe, expect, setDefaultTimeout, test } from "bun:test";
import { Conflict, GpuStatus, Health, JOB_VIEW_EXAMPLE, JobList, JobView, LossCurve, Problem, Resumed, TRAIN_REQUEST_EXAMPLE } from "../../src/api/openapi.ts";
import { TrainRequest } from "../../src/request/schema.ts";
import { inProcessApp } from "../support/app-harness.ts";
import { makeHostTree } from "../support/host-tree.ts";
import { SIMULATOR, simulateModeConfig } from "../support/real-mode.ts";

setDefaultTimeout(60_000);

const METHODS = ["get", "post", "put", "patch", "delete"];

// The structural rules of OpenAPI 3.1 this document relies on.
function structuralErrors(doc: any): string[] {
  const errors: string[] = [];
  if (doc.openapi !== "3.1.0") errors.push("openapi must be 3.1.0");
  if (typeof doc.info?.title !== "string" || typeof doc.info?.version !== "string") errors.push("info.title and info.version are required");
  for (const [path, item] of Object.entries<any>(doc.paths ?? {})) {
    if (!path.startsWith("/")) errors.push(`${path}: paths start with /`);
    const templated = [...path.matchAll(/\{(\w+)\}/g)].map((m) => m[1]);
    for (const [method, op] of Object.entries<any>(item)) {
      if (!METHODS.includes(method)) errors.push(`${path}: unknown method ${method}`);
      if (!op.responses || Object.keys(op.responses).length === 0) errors.push(`${method} ${path}: no responses`);
      for (const [code, r] of Object.entries<any>(op.responses ?? {})) {
        if (!/^[1-5]\d\d$/.test(code)) errors.push(`${method} ${path}: bad status ${code}`);
        if (typeof r.description !== "string") errors.push(`${method} ${path} ${code}: description required`);
      }
      const inPath = (op.parameters ?? []).filter((p: any) => p.in === "path").map((p: any) => p.name);
      if (JSON.stringify(inPath.sort()) !== JSON.stringify([...templated].sort())) errors.push(`${method} ${path}: path parameters do not match the template`);
    }
  }
  return errors;
}

describe("GET /openapi.json", () => {
  test("is a structurally valid OpenAPI 3.1 document covering every route the app serves", async () => {
    using tree = makeHostTree();
    await using a = inProcessApp(tree, simulateModeConfig(tree, { seconds_per_step: 0 }), SIMULATOR);
    const doc = (await a.json("/openapi.json")).body;
    expect(structuralErrors(doc)).toEqual([]);
    const documented = new Set(Object.entries<any>(doc.paths).flatMap(([path, item]) => Object.keys(item).map((m) => `${m.toUpperCase()} ${path}`)));
    const served = a.app.routes
      .filter((r) => r.method !== "ALL")
      .map((r) => `${r.method} ${r.path.replace(/:(\w+)/g, "{$1}").replace(/(.)\/$/, "$1")}`);
    expect(served.filter((r) => !documented.has(r))).toEqual([]);
  });

  test("contrast: the structural check catches a path parameter the template lacks", () => {
    expect(structuralErrors({ openapi: "3.1.0", info: { title: "t", version: "1" }, paths: { "/x": { get: { parameters: [{ name: "id", in: "path" }], responses: { 200: { description: "ok" } } } } } })).not.toEqual([]);
  });

  test("its examples pass the real validators", () => {
    expect(TrainRequest.safeParse(TRAIN_REQUEST_EXAMPLE).success).toBe(true);
    expect(JobView.safeParse(JOB_VIEW_EXAMPLE).success).toBe(true);
  });

  test("real answers of a simulated run match the documented response schemas", async () => {
    using tree = makeHostTree();
    await using a = inProcessApp(tree, simulateModeConfig(tree, { seconds_per_step: 0 }), SIMULATOR);
    const id = (await a.json("/train", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(tree.validRequest()) })).body.worker_job_id;
    const running = (await a.json(`/train/${id}`)).body;
    await a.supervisor.untilIdle();
    for (const [schema, body] of [
      [JobView, running],
      [JobView, (await a.json(`/train/${id}`)).body],
      [JobList, (await a.json("/train")).body],
      [LossCurve, (await a.json(`/train/${id}/metrics`)).body],
      [GpuStatus, (await a.json("/gpu-status")).body],
      [Health, (await a.json("/healthz")).body],
    ] as const) {
      const parsed = schema.safeParse(body);
      expect(parsed.success ? [] : parsed.error.issues).toEqual([]);
    }
  });

  test("real answers of pause and resume match their documented schemas, a refused resume included", async () => {
    using tree = makeHostTree();
    // Fails at step 50, after the fast tier's first saved state at step 40: a failed job that can be resumed.
    await using a = inProcessApp(tree, simulateModeConfig(tree, { seconds_per_step: 0.002, fail: "oom@50" }), SIMULATOR);
    const post = (path: string) => a.json(path, { method: "POST" });
    const id = (await a.json("/train", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(tree.validRequest()) })).body.worker_job_id;
    await a.supervisor.untilIdle();
    const paused = await post(`/train/${id}/pause`);
    const resumed = await post(`/train/${id}/resume`);
    await a.supervisor.untilIdle();
    const refused = await post(`/train/${id}/resume`);
    expect([paused.status, resumed.status, refused.status]).toEqual([200, 200, 409]);
    expect(paused.body).toMatchObject({ status: "failed", resumable: true, resume_step: 40 });
    expect(refused.body.reason).toBe("not_resumable");
    for (const [schema, body] of [
      [JobView, paused.body],
      [Resumed, resumed.body],
      [JobView, (await a.json(`/train/${resumed.body.worker_job_id}`)).body],
      [Conflict, refused.body],
    ] as const) {
      const parsed = schema.safeParse(body);
      expect(parsed.success ? [] : parsed.error.issues).toEqual([]);
    }
  });

  test("a samples job's record and its sample route answer as documented: the PNG as image/png, an unlisted name a Problem 404", async () => {
    using tree = makeHostTree();
    await using a = inProcessApp(tree, simulateModeConfig(tree, { seconds_per_step: 0 }), SIMULATOR);
    const route = (await a.json("/openapi.json")).body.paths["/train/{id}/samples/{name}"].get;
    expect(route.parameters.map((p: any) => [p.in, p.name, p.required])).toEqual([["path", "id", true], ["path", "name", true]]);
    expect(Object.keys(route.responses)).toEqual(["200", "401", "404"]);
    const request = tree.validRequest({ samples: 2 });
    const id = (await a.json("/train", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(request) })).body.worker_job_id;
    await a.supervisor.untilIdle();

    const job = (await a.json(`/train/${id}`)).body;
    const parsed = JobView.safeParse(job);
    expect(parsed.success ? [] : parsed.error.issues).toEqual([]);
    // Two templates, with and without the trigger, at four steps of the fast run.
    expect(job.samples).toHaveLength(16);
    const res = await a.app.request(job.samples[0].url);
    expect(res.status).toBe(200);
    expect([res.headers.get("content-type")]).toEqual(Object.keys(route.responses[200].content));
    expect(new Uint8Array(await res.arrayBuffer()).subarray(0, 4)).toEqual(new Uint8Array([0x89, 0x50, 0x4e, 0x47]));
    for (const path of [`/train/${id}/samples/not-listed.png`, `/train/00000000-0000-4000-8000-000000000000/samples/${job.samples[0].name}`]) {
      const missing = await a.json(path);
      expect(missing.status).toBe(404);
      expect(Problem.safeParse(missing.body).success).toBe(true);
    }
    expect(route.responses[404].content["application/json"].schema).toEqual({ $ref: "#/components/schemas/Problem" });
  });
});
