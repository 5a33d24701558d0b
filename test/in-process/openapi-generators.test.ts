import { describe, expect, setDefaultTimeout, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { Phase } from "../../src/job.ts";
import { inProcessApp } from "../support/app-harness.ts";
import { makeHostTree } from "../support/host-tree.ts";
import { compile, generateTypes, lint, scratchDir } from "../support/openapi-tools.ts";
import { SIMULATOR, simulateModeConfig } from "../support/real-mode.ts";

setDefaultTimeout(60_000);

async function servedDocument(): Promise<any> {
  using tree = makeHostTree();
  await using a = inProcessApp(tree, simulateModeConfig(tree, { seconds_per_step: 0 }), SIMULATOR);
  return (await a.json("/openapi.json")).body;
}

const operations = (doc: any) =>
  Object.entries<any>(doc.paths).flatMap(([path, item]) => Object.entries<any>(item).map(([method, op]) => ({ at: `${method.toUpperCase()} ${path}`, op })));

// A client's use of the generated types: dispatch, read the job back, and lean on the enums and the typed request.
const CALL = `import createClient from "openapi-fetch";
import type { components, paths } from "./api";

type Job = components["schemas"]["JobView"];
const client = createClient<paths>({ baseUrl: "http://127.0.0.1:8203" });

export async function dispatchAndRead(body: components["schemas"]["TrainRequest"]) {
  const dispatched = await client.POST("/train", { body, params: { header: { "Idempotency-Key": "t-123" } } });
  if (dispatched.error) return dispatched.error.detail;
  const { data } = await client.GET("/train/{id}", { params: { path: { id: dispatched.data.worker_job_id } } });
  const status: Job["status"] | undefined = data?.status;
  // The history holds the worker's own smoke runs too.
  const tier: "fast" | "balanced" | "quality" | "smoke" | undefined = data?.request.tier;
  const code: components["schemas"]["ErrorCode"] | undefined = data?.error_code;
  // @ts-expect-error "done" is a phase, not a status
  const notAStatus: Job["status"] = "done";
  return [status, tier, code, notAStatus];
}

export async function newestSample(id: string): Promise<Blob | null> {
  const { data: job } = await client.GET("/train/{id}", { params: { path: { id } } });
  const sample: components["schemas"]["Sample"] | undefined = job?.samples.at(-1);
  const template: "portrait" | "full_body" | "close_up" | "candid" | null | undefined = sample?.template;
  if (!sample || template === undefined) return null;
  const { data } = await client.GET("/train/{id}/samples/{name}", { params: { path: { id, name: sample.name } }, parseAs: "blob" });
  return data ?? null;
}
`;

// The same call with the mistakes a generated client exists to catch.
const WRONG_CALL = `import createClient from "openapi-fetch";
import type { paths } from "./api";

const client = createClient<paths>({ baseUrl: "http://127.0.0.1:8203" });

export async function misuse() {
  const { data } = await client.GET("/train/{id}", { params: { path: { job_id: "x" } } });
  const finished: boolean = data?.status === "done";
  return [finished, data?.request.tier === "turbo"];
}
`;

describe("the OpenAPI document and the tools that consume it", () => {
  test("redocly's recommended rules find nothing in the served document", async () => {
    using scratch = scratchDir();
    expect(await lint(await servedDocument(), scratch.dir)).toEqual({ exitCode: 0, problems: [] });
  });

  test("contrast: the linter reports a document without servers or an operationId", async () => {
    using scratch = scratchDir();
    const doc = await servedDocument();
    delete doc.servers;
    delete doc.paths["/healthz"].get.operationId;
    expect(await lint(doc, scratch.dir)).toEqual({
      exitCode: 1,
      problems: ["error no-empty-servers at #/openapi", "warn operation-operationId at #/paths/~1healthz/get/operationId"],
    });
  });

  test("every operation has a unique operationId, and every one behind the token lists its 4xx answers", async () => {
    const doc = await servedDocument();
    const ops = operations(doc);
    const ids = ops.map(({ op }) => op.operationId);
    expect(ids.every((id) => typeof id === "string")).toBe(true);
    expect(new Set(ids).size).toBe(ids.length);
    // redocly's operation-4xx-response is off only because these two answer every GET: no token, no parameters.
    expect(ops.filter(({ op }) => op.security?.length === 0).map(({ at }) => at)).toEqual(["GET /healthz", "GET /"]);
    expect(ops.filter(({ op }) => op.security?.length !== 0 && !Object.keys(op.responses).some((c) => c.startsWith("4"))).map(({ at }) => at)).toEqual([]);
  });

  test("every JSON body is a named component, the job's request is the JobRequest (a TrainRequest or a smoke run's) and its vocabulary is enums", async () => {
    const doc = await servedDocument();
    const schemas = doc.components.schemas;
    const inline = operations(doc).flatMap(({ at, op }) =>
      [op.requestBody, ...Object.values<any>(op.responses)]
        .map((part) => part?.content?.["application/json"]?.schema)
        .filter((s) => s !== undefined && s.$ref === undefined && at !== "GET /openapi.json")
        .map(() => at),
    );
    expect(inline).toEqual([]);
    expect(schemas.JobView.properties.request).toEqual({ $ref: "#/components/schemas/JobRequest" });
    expect(schemas.JobView.properties.status).toEqual({ $ref: "#/components/schemas/JobStatus" });
    expect(schemas.JobView.properties.phase).toEqual({ $ref: "#/components/schemas/Phase" });
    expect(schemas.JobView.properties.error_code).toEqual({ $ref: "#/components/schemas/ErrorCode" });
    expect(schemas.JobView.properties.samples).toMatchObject({ type: "array", items: { $ref: "#/components/schemas/Sample" } });
    expect(schemas.Sample.required).toEqual(["step", "index", "template", "subject", "prompt", "name", "bytes", "url"]);
    expect(schemas.Sample.properties.template.anyOf).toEqual([{ type: "string", enum: ["portrait", "full_body", "close_up", "candid"] }, { type: "null" }]);
    expect(schemas.TrainRequest.properties.samples).toEqual({ type: "integer", minimum: 0, maximum: 4 });
    expect(schemas.TrainRequest.required).not.toContain("samples");
    expect(Object.keys(doc.paths["/train/{id}/samples/{name}"].get.responses[200].content)).toEqual(["image/png"]);
    // Derived from the one enum, whatever phases it gains.
    expect(schemas.Phase).toEqual({ type: "string", enum: Phase.options });
    expect(Phase.options).toContain("sampling");
    expect(schemas.TrainRequest.properties.tier).toEqual({ type: "string", enum: ["fast", "balanced", "quality"] });
    expect(schemas.Conflict.properties.reason.enum).toEqual(["busy", "output_exists", "output_in_use", "insufficient_vram", "cotenant_active", "insufficient_disk", "not_resumable", "base_model_changed", "smoke_unavailable"]);
    expect(Object.keys(doc.paths["/train/{id}/checkpoints/{step}"].get.responses[200].content)).toEqual(["application/octet-stream"]);
    expect(schemas.Checkpoint.required).toEqual(["step", "sha256", "bytes", "url"]);
    expect(schemas.Unavailable.properties.reason.enum).toEqual(["gpu_probe_failed", "state_unwritable", "slurm_refused"]);
    expect(doc.paths["/train/{id}"].get.responses[200].content["application/json"].schema).toEqual({ $ref: "#/components/schemas/JobView" });
  });

  test("openapi-typescript generates a named type for each component, and a typed call against it compiles", async () => {
    using scratch = scratchDir();
    const doc = await servedDocument();
    const generated = await generateTypes(doc, scratch.dir);
    expect(generated).toContain('request: components["schemas"]["JobRequest"];');
    expect(generated).toContain('JobStatus: "starting" | "training" | "succeeded" | "failed" | "cancelled";');
    expect(generated).toContain('"application/json": components["schemas"]["JobView"];');
    writeFileSync(join(scratch.dir, "call.ts"), CALL);
    expect(await compile(scratch.dir, "call.ts")).toEqual({ exitCode: 0, output: "" });
  });

  test("contrast: a call with a wrong path parameter, status or tier does not compile", async () => {
    using scratch = scratchDir();
    await generateTypes(await servedDocument(), scratch.dir);
    writeFileSync(join(scratch.dir, "wrong.ts"), WRONG_CALL);
    const { exitCode, output } = await compile(scratch.dir, "wrong.ts");
    expect(exitCode).toBe(2);
    expect(output.split("\n").filter((l) => l.startsWith("wrong.ts"))).toEqual([
      expect.stringMatching(/^wrong\.ts\(7,\d+\): error TS2353: .*'job_id' does not exist in type '\{ id: string; \}'/),
      expect.stringMatching(/^wrong\.ts\(8,\d+\): error TS2367: .*'"starting" \| "training" \| "succeeded" \| "failed" \| "cancelled" \| undefined' and '"done"' have no overlap/),
      expect.stringMatching(/^wrong\.ts\(9,\d+\): error TS2367: .*'"fast" \| "balanced" \| "quality" \| "smoke" \| undefined' and '"turbo"' have no overlap/),
    ]);
  });
});
