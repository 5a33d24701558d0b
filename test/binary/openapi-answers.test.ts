import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { JobStatus } from "../../src/job.ts";
import { JOB_VIEW_EXAMPLE } from "../../src/api/openapi.ts";
import { inProcessApp } from "../support/app-harness.ts";
import { TOKEN_A, writeTokens } from "../support/auth-setup.ts";
import { runCli } from "../support/cli-process.ts";
import { type DocumentCheck, documentCheck, eventsOf } from "../support/document-check.ts";
import { GPU_SCENARIOS } from "../support/fake-nvidia-smi.ts";
import { type FakeSlurm, fakeSlurm } from "../support/fake-slurm.ts";
import { FAKE_NVIDIA_SMI, MAIN, makeHostTree, SIMULATE_TABLES, type HostTree } from "../support/host-tree.ts";
import { compile, generateTypes, run, scratchDir } from "../support/openapi-tools.ts";
import { SIMULATOR, simulateModeConfig } from "../support/real-mode.ts";
import { writeExecutable } from "../support/scratch-files.ts";
import { waitFor } from "../support/wait.ts";
import { startWorker, type WorkerProcess } from "../support/worker-process.ts";

// Issue #28: every answer of every route, on both backends, checked against the document the worker serves with a
// JSON Schema validator (document-check.ts). The simulated fast run saves a state every 40 steps and draws previews
// every 100; its GPU runs out of memory drawing step 200's, so a run with samples fails there and one without
// succeeds.
setDefaultTimeout(60_000);

const UNKNOWN_JOB = "3f1c2a4e-0000-4000-8000-000000000000";
const TOO_LARGE = "x".repeat(70_000);

interface Called {
  status: number;
  body: string;
  json: any;
}

const jsonOrNull = (text: string): any => {
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
};

// A worker's answers, each checked against the document as it arrives; `errors` holds what this caller found, and
// `events` the names of the events its streams carried.
function caller(worker: WorkerProcess, check: DocumentCheck, token: string | null) {
  const errors: string[] = [];
  const events = new Set<string>();
  const call = async (method: string, path: string, init: RequestInit & { token?: string | null } = {}): Promise<Called> => {
    const bearer = init.token === undefined ? token : init.token;
    const headers = { ...(bearer === null ? {} : { authorization: `Bearer ${bearer}` }), ...(init.headers as Record<string, string>) };
    const res = await fetch(worker.url + path, { ...init, method, headers });
    const body = await res.text();
    errors.push(...check.check({ method, path: path.split("?")[0]!, status: res.status, contentType: res.headers.get("content-type"), body }));
    return { status: res.status, body, json: jsonOrNull(body) };
  };
  const post = (path: string, body?: unknown, init: RequestInit = {}) =>
    call("POST", path, body === undefined ? init : { ...init, body: JSON.stringify(body), headers: { "content-type": "application/json", ...(init.headers as Record<string, string>) } });
  return {
    errors,
    events,
    call,
    get: (path: string, init?: RequestInit & { token?: string | null }) => call("GET", path, init),
    post,
    // The stream of a job closes at its end: reading it whole waits for the end, and every event is checked.
    async untilEnded(id: string): Promise<any[]> {
      const stream = eventsOf((await call("GET", `/train/${id}/events`)).body);
      stream.forEach((e) => events.add(e.event));
      return stream.map((e) => e.data);
    },
  };
}

// The refusals of a route that reads a JSON body, none of which gets as far as a job.
async function refusedBodies(api: ReturnType<typeof caller>, path: string, invalid: unknown): Promise<number[]> {
  const json = { "content-type": "application/json" };
  const answers = [
    await api.call("POST", path, { body: "seed=1", headers: { "content-type": "text/plain" } }),
    await api.call("POST", path, { body: "{", headers: json }),
    await api.call("POST", path, { body: TOO_LARGE, headers: json }),
    await api.post(path, invalid),
  ];
  return answers.map((a) => a.status);
}

// A path of the template for a job that does not exist.
const unknownPath = (template: string) =>
  template.replace("{id}", UNKNOWN_JOB).replace("{name}", "not-listed.png").replace("{step}", "40");

// nvidia-smi as the fixture scenario named in `<root>/gpu-scenario` says, switched while the worker runs.
function switchableNvidiaSmi(tree: HostTree) {
  const choice = join(tree.root, "gpu-scenario");
  const use = (scenario: string) => writeFileSync(choice, join(GPU_SCENARIOS, scenario));
  use("two-gpus-tts");
  const path = writeExecutable(join(tree.root, "nvidia-smi"), `#!/bin/sh\nexport FAKE_NVIDIA_SMI_SCENARIO="$(cat '${choice}')"\nexec '${FAKE_NVIDIA_SMI}' "$@"\n`);
  return { path, use };
}

// A read-only token: the routes that act answer it 403.
const READER = "r3ad-only-t0ken-5a7c9e1b3d2f";

function localConfig(tree: HostTree, nvidiaSmi: string): string {
  const tables = SIMULATE_TABLES(0.003)
    .replace("[simulate]\n", '[simulate]\nfail = "sample-oom@200"\n')
    .replace(JSON.stringify(FAKE_NVIDIA_SMI), `${JSON.stringify(nvidiaSmi)}\ncache_ttl_ms = 0`);
  const tokens = writeTokens(join(tree.root, "auth"), [TOKEN_A]);
  const readers = writeTokens(join(tree.root, "auth"), [READER], "read-token");
  const auth = `mode = "token"\ntoken_file = ${JSON.stringify(tokens)}\nread_token_file = ${JSON.stringify(readers)}`;
  return tree.writeConfig(`${tables}[auth]\n${auth}\n[smoke]\nbase_model = ${JSON.stringify(tree.model)}\n`);
}

function slurmConfig(tree: HostTree, slurm: FakeSlurm): string {
  const tables = SIMULATE_TABLES(0.003).replace('mode = "simulate"', 'mode = "simulate"\nbackend = "slurm"');
  const slurmTable = `[slurm]\nmax_active_jobs = 1\nbin_dir = ${JSON.stringify(slurm.binDir)}\npoll_seconds = 0.2\n`;
  const devices = '[[devices]]\nindex = 0\nname = "A6000"\nclass = "48gb"\ngres = "gpu:a6000:1"\n';
  return tree.writeConfig(`${tables}[auth]\nmode = "none"\n${slurmTable}${devices}`);
}

// The served document less what lets it describe the Slurm backend: the record's Slurm fields and the cluster's
// shape of /gpu-status.
function withoutSlurm(doc: any): any {
  const copy = structuredClone(doc);
  delete copy.components.schemas.JobView.properties.queue_reason;
  delete copy.components.schemas.JobView.properties.slurm_job_id;
  copy.components.schemas.GpuStatus = { $ref: "#/components/schemas/HostGpuStatus" };
  return copy;
}

describe("the served OpenAPI document describes every answer the worker gives", () => {
  let doc: any;
  let check: DocumentCheck;
  let local: { tree: HostTree; worker: WorkerProcess; gpu: ReturnType<typeof switchableNvidiaSmi> };
  let slurm: { tree: HostTree; worker: WorkerProcess; fake: FakeSlurm };
  // Disposed in reverse: the workers, then the fake Slurm's jobs, then the trees.
  const held = new AsyncDisposableStack();

  beforeAll(async () => {
    const localTree = held.use(makeHostTree());
    const slurmTree = held.use(makeHostTree());
    const fake = held.use(fakeSlurm(slurmTree.root));
    const gpu = switchableNvidiaSmi(localTree);
    local = { tree: localTree, worker: held.use(await startWorker(localConfig(localTree, gpu.path))), gpu };
    slurm = { tree: slurmTree, worker: held.use(await startWorker(slurmConfig(slurmTree, fake))), fake };
    doc = await (await fetch(`${local.worker.url}/openapi.json`, { headers: { authorization: `Bearer ${TOKEN_A}` } })).json();
    check = documentCheck(doc);
  });
  afterAll(() => held.disposeAsync());

  test("on the local backend: every route, its refusals, a job in every status and every event", async () => {
    const api = caller(local.worker, check, TOKEN_A);
    const records: any[] = [];

    // Each operation behind the token, without it; and one with a token that is not valid.
    for (const [path, item] of Object.entries<any>(doc.paths)) {
      for (const [method, op] of Object.entries<any>(item)) {
        if (op.security?.length !== 0) expect((await api.call(method.toUpperCase(), unknownPath(path), { token: null })).status).toBe(401);
      }
    }
    expect((await api.get("/train", { token: "0".repeat(32) })).status).toBe(401);
    // Each operation that acts, with a read-only token.
    for (const [path, item] of Object.entries<any>(doc.paths)) {
      if (item.post) expect((await api.call("POST", unknownPath(path), { token: READER })).status).toBe(403);
    }
    for (const path of ["/", "/healthz", "/openapi.json", "/metrics", "/gpu-status"]) expect((await api.get(path)).status).toBe(200);

    // Refusals that reach no job.
    expect(await refusedBodies(api, "/train", {})).toEqual([415, 400, 413, 422]);
    expect(await refusedBodies(api, "/smoke", { device_index: 7 })).toEqual([415, 400, 413, 422]);
    expect(await refusedBodies(api, "/dataset/check", {})).toEqual([415, 400, 413, 422]);
    // Four checks sent at once: one prepares, the others find it busy (one at a time), each answer checked.
    const checks = await Promise.all([1, 2, 3, 4].map(() => api.post("/dataset/check", local.tree.validRequest())));
    expect(new Set(checks.map((c) => c.status))).toEqual(new Set([200, 409]));
    expect((await api.post("/train", local.tree.validRequest(), { headers: { "idempotency-key": "k".repeat(300) } })).status).toBe(422);
    for (const query of ["status=bogus", "limit=0"]) expect((await api.get(`/train?${query}`)).status).toBe(422);
    for (const [path, item] of Object.entries<any>(doc.paths)) {
      if (!path.includes("{id}")) continue;
      for (const method of Object.keys(item)) expect((await api.call(method.toUpperCase(), unknownPath(path))).status).toBe(404);
    }
    expect((await api.get("/train/not-a-uuid")).status).toBe(404);

    // What the GPUs refuse: a co-tenant in the way, too little VRAM for the previews, nvidia-smi failing.
    local.gpu.use("busy-cards");
    expect((await api.post("/train", local.tree.validRequest({ output_name: "refused" }))).json.reason).toBe("cotenant_active");
    // The A6000 has 19136 MiB free: a balanced run with previews needs 18000 + 3584.
    const balanced = local.tree.validRequest({ device_index: 1, tier: "balanced", samples: 1 });
    expect((await api.post("/train", balanced)).json.reason).toBe("insufficient_vram");
    local.gpu.use("no-driver");
    expect((await api.get("/gpu-status")).status).toBe(503);
    for (const [path, body] of [["/train", local.tree.validRequest()], ["/smoke", { device_index: 0 }]]) {
      expect((await api.post(path as string, body)).json.reason).toBe("gpu_probe_failed");
    }
    expect((await api.get("/healthz")).json.gpu).toMatchObject({ probed: true, ok: false });
    local.gpu.use("two-gpus-tts");

    // A run that succeeds, streamed from its claim; what is refused while it runs and after.
    const one = local.tree.validRequest({ output_name: "one" });
    const dispatched = await api.post("/train", one, { headers: { "idempotency-key": "one" } });
    const id = dispatched.json.worker_job_id as string;
    records.push((await api.get(`/train/${id}`)).json);
    const streamed = api.untilEnded(id);
    expect((await api.post("/train", one, { headers: { "idempotency-key": "one" } })).json.worker_job_id).toBe(id);
    expect((await api.post("/train", local.tree.validRequest({ output_name: "other" }))).json.reason).toBe("busy");
    expect((await api.post("/smoke", { device_index: 0 })).json.reason).toBe("busy");
    expect((await api.get("/healthz")).json.active_job_id).toBe(id);
    records.push(...(await streamed));
    const succeeded = (await api.get(`/train/${id}`)).json;
    expect(succeeded.status).toBe("succeeded");
    for (const path of ["log", "metrics"]) expect((await api.get(`/train/${id}/${path}`)).status).toBe(200);
    for (const path of ["log?lines=0", "metrics?max_points=1"]) expect((await api.get(`/train/${id}/${path}`)).status).toBe(422);
    for (const [after, status] of [["0.0", 200], ["bogus", 422]] as const) expect((await api.get(`/train/${id}/log?after=${after}`)).status).toBe(status);
    // A cut record that never settles (a shim killed in the cut): no offset in the log is trusted.
    const cuts = join(local.tree.state, "jobs", id, "train.log.cuts");
    const settled = readFileSync(cuts);
    writeFileSync(cuts, "half a record");
    expect((await api.get(`/train/${id}/log?after=0.0`)).status).toBe(503);
    writeFileSync(cuts, settled);
    expect((await api.get(`/train/${id}/checkpoints/9999`)).status).toBe(404);
    expect((await api.get(`/train/${id}/events`, { headers: { "last-event-id": "end" } })).status).toBe(204);
    expect((await api.post("/train", one)).json.reason).toBe("output_exists");
    for (const action of ["cancel", "pause"]) records.push((await api.post(`/train/${id}/${action}`)).json);
    expect((await api.post(`/train/${id}/resume`)).json.reason).toBe("not_resumable");

    // A run that fails drawing its previews; its resume is paused at its first saved state.
    const failedId = (await api.post("/train", local.tree.validRequest({ output_name: "two", samples: 1 }))).json.worker_job_id as string;
    records.push(...(await api.untilEnded(failedId)));
    const failed = (await api.get(`/train/${failedId}`)).json;
    expect(failed).toMatchObject({ status: "failed", error_code: "cuda_oom", resumable: true });
    for (const url of [failed.samples[0].url, failed.checkpoints[0].url]) expect((await api.get(url)).status).toBe(200);
    expect(await refusedBodies(api, `/train/${failedId}/resume`, { samples: 5 })).toEqual([415, 400, 413, 422]);
    const resumed = await api.post(`/train/${failedId}/resume`, { samples: 0 });
    const pausedId = resumed.json.worker_job_id as string;
    const paused = (await api.post(`/train/${pausedId}/pause`)).json;
    expect(paused).toMatchObject({ status: "cancelled", paused: true, resumable: true, resumed_from: failedId });
    records.push(paused, (await api.get(`/train/${failedId}`)).json);
    expect((await api.post(`/train/${failedId}/resume`)).json.reason).toBe("not_resumable");
    local.gpu.use("no-driver");
    expect((await api.post(`/train/${pausedId}/resume`)).json.reason).toBe("gpu_probe_failed");
    local.gpu.use("two-gpus-tts");

    // A run cancelled as soon as it is claimed, and the worker's own smoke run (paused from its start, it may end
    // first: the simulated run is done in milliseconds).
    const cancelledId = (await api.post("/train", local.tree.validRequest({ output_name: "three" }))).json.worker_job_id as string;
    records.push((await api.post(`/train/${cancelledId}/cancel`)).json);
    const smoke = await api.post("/smoke", { device_index: 0 });
    records.push(...(await api.untilEnded(smoke.json.worker_job_id)));

    const listed = await api.get("/train?limit=2");
    records.push(...listed.json.jobs, ...(await api.get(`/train?cursor=${listed.json.next_cursor}`)).json.jobs);
    expect((await api.get("/train?status=paused")).json.jobs.map((j: any) => j.worker_job_id)).toContain(pausedId);
    expect((await api.get("/metrics")).status).toBe(200);

    expect(api.errors).toEqual([]);
    expect(new Set(records.map((r) => r.status))).toEqual(new Set(JobStatus.options));
    expect(new Set(records.map((r) => r.request.tier))).toEqual(new Set(["fast", "smoke"]));
    expect([...api.events].sort()).toEqual(["end", "job"]);
    // Closed as the answers are: a field the document does not name is caught in a real answer too.
    const health = (await api.get("/healthz")).json;
    expect(check.component("Health", { ...health, restarts: 0 })).toEqual([expect.stringContaining("must NOT have additional properties")]);
  });

  test("on the Slurm backend: the record's queue_reason and slurm_job_id and the cluster's GPUs, which a document without them rejects", async () => {
    const api = caller(slurm.worker, check, null);
    const { fake, tree } = slurm;
    expect((await api.get("/openapi.json")).json).toEqual(doc);
    expect((await api.get("/healthz")).json).toMatchObject({ backend: "slurm", max_active_jobs: 1, auth_mode: "none" });
    const cluster = await api.get("/gpu-status");
    expect(cluster.json.nodes.map((n: any) => n.gpus)).toEqual([[{ type: "a6000", total: 2, allocated: 0 }], [{ type: null, total: 1, allocated: 0 }]]);
    fake.failNodes(true);
    expect((await api.get("/gpu-status")).json.reason).toBe("gpu_probe_failed");
    fake.failNodes(false);
    fake.refuse("sbatch: error: Invalid generic resource (gres) specification");
    expect((await api.post("/train", tree.validRequest())).json.reason).toBe("slurm_refused");
    fake.refuse(null);

    // Held in Slurm's queue, then released to run to its end.
    fake.hold(true);
    const id = (await api.post("/train", tree.validRequest({ output_name: "one" }))).json.worker_job_id as string;
    const queued = await waitFor(async () => {
      const { json } = await api.get(`/train/${id}`);
      return json.queue_reason === undefined ? null : json;
    }, "the run to wait in Slurm's queue");
    expect(queued).toMatchObject({ status: "starting", phase: "queued", queue_reason: "Resources", slurm_job_id: expect.stringMatching(/^\d+$/) });
    const streamed = api.untilEnded(id);
    expect((await api.post("/train", tree.validRequest({ output_name: "two" }))).json.reason).toBe("busy");
    expect((await api.get("/healthz")).json.active_job_ids).toEqual([id]);
    fake.hold(false);
    const events = await streamed;
    expect(events.at(-1)).toMatchObject({ status: "succeeded", slurm_job_id: queued.slurm_job_id });

    // Cancelled while Slurm still holds it.
    fake.hold(true);
    const heldId = (await api.post("/train", tree.validRequest({ output_name: "three" }))).json.worker_job_id as string;
    await waitFor(async () => (await api.get(`/train/${heldId}`)).json.queue_reason !== undefined, "the second run to be queued");
    const cancelled = (await api.post(`/train/${heldId}/cancel`)).json;
    fake.hold(false);
    expect(cancelled).toMatchObject({ status: "cancelled", slurm_job_id: expect.stringMatching(/^\d+$/) });
    expect((await api.get("/train")).json.jobs.map((j: any) => j.status)).toEqual(["cancelled", "succeeded"]);
    expect(api.errors).toEqual([]);
    expect([...api.events].sort()).toEqual(["end", "job"]);

    // The contrast: the same answers against a document without the Slurm fields and shape.
    const strict = documentCheck(withoutSlurm(doc));
    const answer = (path: string, body: unknown) => ({ method: "GET", path, status: 200, contentType: "application/json", body: JSON.stringify(body) });
    expect(strict.check(answer(`/train/${id}`, queued))).toEqual([
      expect.stringContaining("must NOT have additional properties"),
      expect.stringContaining("must NOT have additional properties"),
    ]);
    expect(strict.check(answer("/gpu-status", cluster.json)).length).toBeGreaterThan(0);
  });

  test("a body that does not arrive in time is answered 408 as documented, on each route that reads one", async () => {
    using tree = makeHostTree();
    await using a = inProcessApp(tree, simulateModeConfig(tree, { seconds_per_step: 0 }), SIMULATOR, { bodyDeadlineMs: 50 });
    const errors: string[] = [];
    for (const path of ["/train", `/train/${UNKNOWN_JOB}/resume`, "/smoke", "/dataset/check"]) {
      const body = new ReadableStream({ start: (c) => c.enqueue(new TextEncoder().encode("{")) }); // never closes
      const init = { method: "POST", headers: { "content-type": "application/json" }, body, duplex: "half" };
      const res = await a.app.request(path, init as RequestInit);
      errors.push(...check.check({ method: "POST", path, status: res.status, contentType: res.headers.get("content-type"), body: await res.text() }));
      expect(res.status).toBe(408);
    }
    expect(errors).toEqual([]);
  });

  test("together, the answers above are every answer the document lists", () => {
    expect(check.documented().filter((at) => !check.covered().includes(at))).toEqual([]);
  });

  test("contrast: the checks reject a field the document does not name, a wrong type, an event that is not a record, and an answer it does not list", () => {
    const fresh = documentCheck(doc);
    expect(fresh.component("JobView", JOB_VIEW_EXAMPLE)).toEqual([]);
    expect(fresh.component("JobView", { ...JOB_VIEW_EXAMPLE, queue: "Resources" })).toEqual([expect.stringContaining("must NOT have additional properties")]);
    expect(fresh.component("JobView", { ...JOB_VIEW_EXAMPLE, step: "640" })).toEqual([expect.stringContaining("/step must be integer")]);
    const stream = (data: string) => ({ method: "GET", path: `/train/${UNKNOWN_JOB}/events`, status: 200, contentType: "text/event-stream", body: `event: job\ndata: ${data}\nid: 1\n\n` });
    expect(fresh.check(stream(JSON.stringify(JOB_VIEW_EXAMPLE)))).toEqual([]);
    expect(fresh.check(stream(JSON.stringify(JSON.stringify(JOB_VIEW_EXAMPLE)))).length).toBeGreaterThan(0);
    const teapot = { method: "GET", path: "/healthz", status: 418, contentType: "application/json", body: "{}" };
    expect(fresh.check(teapot)).toEqual(["GET /healthz 418: not in the document"]);
    expect(fresh.check({ ...teapot, status: 200, contentType: "text/html" })).toEqual(["GET /healthz 200: text/html, not one of application/json"]);
  });

  test("a client generated from the document compiles and is run against both backends; without the Slurm fields it does not compile", async () => {
    using scratch = scratchDir();
    await generateTypes(doc, scratch.dir, "api");
    await generateTypes(withoutSlurm(doc), scratch.dir, "api-without-slurm");
    writeFileSync(join(scratch.dir, "client.ts"), CLIENT);
    writeFileSync(join(scratch.dir, "client-without-slurm.ts"), CLIENT.replace('from "./api"', 'from "./api-without-slurm"'));
    writeFileSync(join(scratch.dir, "read.mjs"), READ);
    const { exitCode, output } = await compile(scratch.dir, "client.ts", "client-without-slurm.ts");
    expect(exitCode).toBe(2);
    expect(output.split("\n").filter((line) => line.startsWith("client"))).toEqual([
      expect.stringMatching(/^client-without-slurm\.ts\(\d+,\d+\): error TS2339: Property 'nodes' does not exist/),
      expect.stringMatching(/^client-without-slurm\.ts\(\d+,\d+\): error TS2339: Property 'queue_reason' does not exist/),
      expect.stringMatching(/^client-without-slurm\.ts\(\d+,\d+\): error TS2339: Property 'queue_reason' does not exist/),
      expect.stringMatching(/^client-without-slurm\.ts\(\d+,\d+\): error TS2339: Property 'slurm_job_id' does not exist/),
    ]);

    const read = async (worker: WorkerProcess, token: string, output: string) => {
      const request = JSON.stringify(worker === slurm.worker ? slurm.tree.validRequest({ output_name: output }) : local.tree.validRequest({ output_name: output }));
      const result = await run([process.execPath, "read.mjs", worker.url, token, request], scratch.dir);
      expect(result.stderr).toBe("");
      return JSON.parse(result.stdout);
    };
    slurm.fake.hold(true);
    const fromSlurm = await read(slurm.worker, "", "client");
    slurm.fake.hold(false);
    expect(fromSlurm).toEqual({
      backend: "slurm",
      writable: true,
      gpus: ["fake1: a6000 0/2", "fake2: gpu 0/1"],
      queued: "Resources",
      ended: "cancelled",
      slurm_job_id: expect.stringMatching(/^\d+$/),
    });
    expect(await read(local.worker, TOKEN_A, "client")).toEqual({
      backend: "local",
      writable: true,
      gpus: ["0: NVIDIA GeForce RTX 3090", "1: NVIDIA RTX A6000"],
      queued: null,
      ended: "cancelled",
      slurm_job_id: null,
    });
  });

  test("the worker's own client reads /gpu-status on the Slurm backend: lora-worker gpu lists the cluster's nodes", async () => {
    const { exitCode, stdout } = await runCli(process.execPath, [MAIN, "gpu"], { LORA_WORKER_URL: slurm.worker.url });
    expect({ exitCode, lines: stdout.trim().split("\n") }).toEqual({
      exitCode: 0,
      lines: ["fake1 (IDLE): a6000: 0 of 2 allocated", "fake2 (IDLE+DRAIN): gpu: 0 of 1 allocated"],
    });
  });
});

// A client project's use of the generated types against a running worker: what it knows of the worker, the GPUs
// of either backend, and a run it dispatches, waits for until it is queued in Slurm or trains, and cancels.
const CLIENT = `import createClient from "openapi-fetch";
import type { components, paths } from "./api";

type Job = components["schemas"]["JobView"];
type Node = components["schemas"]["ClusterGpuStatus"]["nodes"][number];
const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const nodeLine = (n: Node) => n.name + ": " + n.gpus.map((g) => (g.type ?? "gpu") + " " + g.allocated + "/" + g.total).join(", ");

export async function read(baseUrl: string, token: string, body: components["schemas"]["TrainRequest"]) {
  const client = createClient<paths>({ baseUrl, headers: token === "" ? {} : { Authorization: "Bearer " + token } });
  const { data: health } = await client.GET("/healthz");
  const { data: status } = await client.GET("/gpu-status");
  if (!health || !status) throw new Error("no health or GPU status");
  const gpus = "devices" in status ? status.devices.map((d) => d.index + ": " + d.name) : status.nodes.map(nodeLine);
  const dispatched = await client.POST("/train", { body });
  if (dispatched.error) throw new Error(dispatched.error.detail.toString());
  const id = dispatched.data.worker_job_id;
  let job: Job | undefined;
  for (let tries = 0; tries < 500 && job?.queue_reason === undefined && job?.status !== "training"; tries++) {
    await pause(20);
    job = (await client.GET("/train/{id}", { params: { path: { id } } })).data;
  }
  const { data: ended } = await client.POST("/train/{id}/cancel", { params: { path: { id } } });
  return {
    backend: health.backend,
    writable: health.state_dir.writable,
    gpus,
    queued: job?.queue_reason ?? null,
    ended: ended?.status,
    slurm_job_id: ended?.slurm_job_id ?? null,
  };
}
`;

const READ = `import { read } from "./client.ts";
const [url, token, request] = process.argv.slice(2);
console.log(JSON.stringify(await read(url, token, JSON.parse(request))));
`;
