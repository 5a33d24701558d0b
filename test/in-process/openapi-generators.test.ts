import { describe, expect, setDefaultTimeout, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { Unavailable } from "../../src/api/openapi.ts";
import { retryAftersOf } from "../../src/dispatch/refusal.ts";
import { Phase } from "../../src/job.ts";
import { inProcessApp } from "../support/app-harness.ts";
import { MAIN, makeHostTree } from "../support/host-tree.ts";
import { compile, generateTypes, lint, scratchDir } from "../support/openapi-tools.ts";
import { SIMULATOR, simulateModeConfig } from "../support/real-mode.ts";

setDefaultTimeout(60_000);

async function servedDocument(): Promise<any> {
  using tree = makeHostTree();
  await using a = inProcessApp(tree, simulateModeConfig(tree, { seconds_per_step: 0 }), SIMULATOR);
  return (await a.json("/openapi.json")).body;
}

// `lora-worker openapi` from source, in an empty folder, with no config to find and no token.
async function printedDocument(dir: string): Promise<any> {
  const proc = Bun.spawn([process.execPath, MAIN, "openapi"], {
    cwd: dir,
    env: { PATH: process.env.PATH ?? "/usr/bin:/bin", LORA_WORKER_CONFIG: "/nonexistent/config.toml" },
    stdout: "pipe",
    stderr: "pipe",
  });
  const [stdout, stderr, exitCode] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  expect({ exitCode, stderr }).toEqual({ exitCode: 0, stderr: "" });
  return JSON.parse(stdout);
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
    expect(schemas.Conflict.properties.reason.enum).toEqual(["busy", "output_exists", "output_in_use", "insufficient_vram", "cotenant_active", "insufficient_disk", "not_resumable", "base_model_changed", "smoke_unavailable", "check_busy"]);
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

  test("lora-worker openapi prints the served document with no server, config or token, and a typed client generated from it compiles", async () => {
    using scratch = scratchDir();
    const printed = await printedDocument(scratch.dir);
    // The in-process app is given the version "test"; the binary's test holds the two equal as they are.
    expect({ ...printed, info: { ...printed.info, version: "test" } }).toEqual(await servedDocument());
    await generateTypes(printed, scratch.dir);
    writeFileSync(join(scratch.dir, "call.ts"), CALL);
    expect(await compile(scratch.dir, "call.ts")).toEqual({ exitCode: 0, output: "" });
    // Contrast: the printed types still refuse a wrong call.
    writeFileSync(join(scratch.dir, "wrong.ts"), WRONG_CALL);
    expect((await compile(scratch.dir, "wrong.ts")).exitCode).toBe(2);
  });

  test("the 409s and 503s of the refusable routes declare Retry-After with the reasons REFUSALS sends it with, and only those", async () => {
    const doc = await servedDocument();
    const declared = operations(doc).flatMap(({ at, op }) =>
      ["409", "503"].filter((code) => op.responses[code]?.headers?.["Retry-After"]).map((code) => `${at} ${code}`));
    expect(declared).toEqual([
      "POST /train 409", "POST /train 503", "POST /train/{id}/resume 409", "POST /train/{id}/resume 503",
      "POST /smoke 409", "POST /smoke 503", "POST /dataset/check 409",
    ]);
    const header = doc.paths["/train"].post.responses;
    for (const status of [409, 503] as const) {
      const sent = retryAftersOf(status);
      expect(sent.length).toBeGreaterThan(0);
      for (const { reason, seconds } of sent) expect(header[status].headers["Retry-After"].description).toContain(`${reason} (${seconds} s)`);
    }
    expect(header[409].headers["Retry-After"].schema).toEqual({ type: "integer", minimum: 1 });
    // Contrast: /gpu-status's 503 is gpu_probe_failed alone, which REFUSALS sends without Retry-After.
    expect(retryAftersOf(503).map((r) => r.reason)).not.toContain("gpu_probe_failed");
    expect(doc.paths["/gpu-status"].get.responses[503].headers).toBeUndefined();
  });

  test("the 503 of POST /train names each reason it is sent with, and not a trainer's start, which ends a claimed job", async () => {
    const doc = await servedDocument();
    const description: string = doc.paths["/train"].post.responses[503].description;
    for (const reason of Unavailable.shape.reason.options) expect(description).toContain(reason);
    expect(description).not.toContain("trainer");
  });
});
