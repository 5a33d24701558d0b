import { describe, expect, test } from "bun:test";
import { Database } from "bun:sqlite";
import { existsSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { MAX_BODY_BYTES } from "../../src/api/body.ts";
import { MAX_JSON_DEPTH } from "../../src/request/json-text.ts";
import { TOKENIZERS } from "../../src/tokenizers/layout.ts";
import { FAKE_NVIDIA_SMI, makeHostTree, type HostTree } from "../support/host-tree.ts";
import { fakeNvidiaSmi } from "../support/fake-nvidia-smi.ts";
import { inProcessApp } from "../support/app-harness.ts";
import { SIMULATOR, TRAINERS, realModeConfig, simulateModeConfig } from "../support/real-mode.ts";
import { waitFor } from "../support/wait.ts";
import { CLIP_MERGES, writeTokenizers } from "../support/tokenizers.ts";

// The app in process over a fixture trainer whose tree ignores SIGTERM.
function appFor(tree: HostTree, nvidiaSmi = FAKE_NVIDIA_SMI, bodyDeadlineMs?: number) {
  const trainer = join(TRAINERS, "stubborn-tree.sh");
  return inProcessApp(tree, realModeConfig(tree, trainer), [trainer], { nvidiaSmi, bodyDeadlineMs });
}

function jobRows(tree: HostTree): number {
  using db = new Database(join(tree.state, "jobs.db"), { readonly: true });
  return db.query<{ n: number }, []>("SELECT count(*) AS n FROM jobs").get()!.n;
}

describe("HTTP surface", () => {
  const shapes: Array<[string, (a: ReturnType<typeof appFor>) => Response | Promise<Response>, number, unknown]> = [
    ["malformed JSON", (a) => a.post("{"), 400, { detail: expect.stringContaining("not valid JSON") }],
    ["a wrong content type", (a) => a.post("{}", "text/plain"), 415, { detail: 'Content-Type must be application/json, got "text/plain"' }],
    ["an oversized body", (a) => a.post(JSON.stringify({ x: "a".repeat(MAX_BODY_BYTES) })), 413, { detail: `request body is larger than ${MAX_BODY_BYTES} bytes` }],
    ["a body that is not an object", (a) => a.post("[]"), 422, { detail: [{ loc: ["body"], msg: "request body must be a JSON object, got an array", type: "type_error" }] }],
    ["a wrong method", (a) => a.app.request("/train", { method: "DELETE" }), 405, { detail: "method DELETE not allowed on /train; allowed: GET, POST" }],
    ["an unknown job", (a) => a.app.request("/train/3f1c2a4e-0000-4000-8000-000000000000"), 404, { detail: "no such job" }],
    ["a malformed job id", (a) => a.app.request("/train/..%2f..%2fetc"), 404, { detail: "no such job" }],
    ["an unknown route", (a) => a.app.request("/nope"), 404, { detail: "not found" }],
    ["a duplicate key", (a) => a.post('{"seed":1,"seed":2}'), 422, { detail: expect.arrayContaining([{ loc: ["body", "seed"], msg: "appears more than once in the object; each key may appear once", type: "duplicate_key" }]) }],
    ["an integer written as a float", (a) => a.post('{"repeats":10.0}'), 422, { detail: expect.arrayContaining([{ loc: ["body", "repeats"], msg: "must be an integer, got the number literal 10.0", type: "type_error" }]) }],
    ["a body nested past the limit", (a) => a.post(`${"[".repeat(33)}${"]".repeat(33)}`), 413, { detail: `request body nests deeper than ${MAX_JSON_DEPTH} levels` }],
    ["bytes that are not UTF-8", (a) => a.app.request("/train", { method: "POST", headers: { "content-type": "application/json" }, body: new Uint8Array([0x22, 0xff, 0x22]) }), 400, { detail: "request body is not valid UTF-8" }],
    ["a bad Idempotency-Key", (a) => a.app.request("/train", { method: "POST", headers: { "content-type": "application/json", "idempotency-key": "a b" }, body: "{}" }), 422, { detail: expect.arrayContaining([{ loc: ["header", "Idempotency-Key"], msg: "must be 1-255 printable ASCII characters without spaces", type: "value_error" }]) }],
    ["a log request with lines=0", (a) => a.app.request("/train/3f1c2a4e-0000-4000-8000-000000000000/log?lines=0"), 404, { detail: "no such job" }],
  ];
  for (const [name, send, status, body] of shapes) {
    test(`${name} answers ${status} with a detail and leaves nothing behind`, async () => {
      using tree = makeHostTree();
      await using a = appFor(tree);
      const res = await send(a);
      expect(res.status).toBe(status);
      expect(await res.json()).toEqual(body);
      expect(jobRows(tree)).toBe(0);
      expect(readdirSync(tree.state).filter((name) => !name.startsWith("jobs.db"))).toEqual([]);
    });
  }

  test("a body that stops arriving is answered 408 at the deadline, and the connection is closed", async () => {
    using tree = makeHostTree();
    await using a = appFor(tree, FAKE_NVIDIA_SMI, 100);
    const body = new ReadableStream({ start: (c) => c.enqueue(new TextEncoder().encode('{"seed":')) }); // never closes
    const res = await a.app.request("/train", { method: "POST", headers: { "content-type": "application/json" }, body, duplex: "half" } as RequestInit);
    expect([res.status, res.headers.get("connection"), await res.json()]).toEqual([408, "close", { detail: "request body not received within 0.1 s" }]);
    expect(jobRows(tree)).toBe(0);
  });

  test("an oversized body is refused by its Content-Length before a byte of it is read", async () => {
    using tree = makeHostTree();
    await using a = appFor(tree);
    let pulled = false;
    const body = new ReadableStream({ pull: () => void (pulled = true) }, { highWaterMark: 0 });
    const res = await a.app.request("/train", { method: "POST", headers: { "content-type": "application/json", "content-length": String(MAX_BODY_BYTES + 1) }, body, duplex: "half" } as RequestInit);
    expect([res.status, res.headers.get("connection"), pulled]).toEqual([413, "close", false]);
  });

  test("a 422 names each bad field in arbo's pydantic shape", async () => {
    using tree = makeHostTree();
    await using a = appFor(tree);
    const res = await a.post(JSON.stringify(tree.validRequest({ repeats: 0, tier: "quality" })));
    expect(res.status).toBe(422);
    expect(await res.json()).toEqual({
      detail: [
        { loc: ["body", "repeats"], msg: "must be at least 1", type: "too_small" },
        { loc: ["body", "device_index"], msg: expect.stringMatching(/^tier "quality" needs a 48gb device; device 0 is /), type: "tier_device_mismatch" },
      ],
    });
  });

  test("/healthz reports the trainer mode, auth mode and defaults in use", async () => {
    using tree = makeHostTree();
    await using a = appFor(tree);
    const res = await a.app.request("/healthz");
    expect(await res.json()).toMatchObject({ status: "ok", version: "test", active_job_id: null, trainer_mode: "real", simulated: false, auth_mode: "none" });
  });

  test("/healthz says whether the CLIP tokenizers are ready, and sees an import made while it runs", async () => {
    using tree = makeHostTree();
    await using a = appFor(tree);
    const dir = join(tree.state, "tokenizers");
    const before = ((await (await a.app.request("/healthz")).json()) as any).tokenizers;
    expect(before).toEqual({ dir, ready: false, problems: TOKENIZERS.map((t) => `${t.folder} is missing (tokenizer ${t.id})`) });
    writeTokenizers(dir);
    const after = ((await (await a.app.request("/healthz")).json()) as any).tokenizers;
    expect(after).toEqual({ dir, ready: true, problems: [] });
  });

  test("in simulate mode /healthz reports no tokenizer problem, since the simulated trainer loads none; contrast: real mode on the same empty folder is not ready", async () => {
    using tree = makeHostTree();
    const dir = join(tree.state, "tokenizers");
    {
      await using simulated = inProcessApp(tree, simulateModeConfig(tree, { seconds_per_step: 0 }), SIMULATOR);
      const health = (await (await simulated.app.request("/healthz")).json()) as any;
      expect([health.simulated, health.tokenizers]).toEqual([true, { dir, ready: true, problems: [], required: false }]);
    }
    await using real = appFor(tree);
    expect(((await (await real.app.request("/healthz")).json()) as any).tokenizers).toMatchObject({ dir, ready: false });
  });

  test("/healthz says not ready once a tokenizer's merges.txt is cut, though every file is there", async () => {
    using tree = makeHostTree();
    await using a = appFor(tree);
    const dir = writeTokenizers(join(tree.state, "tokenizers"));
    const readiness = async () => ((await (await a.app.request("/healthz")).json()) as any).tokenizers;
    expect(await readiness()).toEqual({ dir, ready: true, problems: [] });
    const [clipL] = TOKENIZERS;
    writeFileSync(join(dir, clipL!.folder, "merges.txt"), CLIP_MERGES.slice(0, 300_000));
    expect(await readiness()).toEqual({
      dir,
      ready: false,
      problems: [`${clipL!.folder}/merges.txt holds 29418 merges after its #version line, not CLIP's 48894 (cut short?)`],
    });
  });

  test("/gpu-status joins processes to devices and marks the TTS co-tenant on the 3090", async () => {
    using tree = makeHostTree();
    await using a = appFor(tree, fakeNvidiaSmi(tree.root, "two-gpus-tts").path);
    const body = (await (await a.app.request("/gpu-status")).json()) as any;
    expect(body.tts_on_3090).toBe(true);
    expect(body.devices.map((d: any) => [d.index, d.processes.map((p: any) => p.role)])).toEqual([[0, ["cotenant"]], [1, []]]);
  });

  test("/gpu-status answers 503 gpu_probe_failed with nvidia-smi's own words", async () => {
    using tree = makeHostTree();
    await using a = appFor(tree, fakeNvidiaSmi(tree.root, "driver-mismatch").path);
    const res = await a.app.request("/gpu-status");
    expect(res.status).toBe(503);
    expect(await res.json()).toEqual({ detail: "Failed to initialize NVML: Driver/library version mismatch", reason: "gpu_probe_failed" });
  });

  test("of 50 simultaneous dispatches exactly one wins; the rest get 409 busy naming it", async () => {
    using tree = makeHostTree();
    await using a = appFor(tree);
    const responses = await Promise.all(
      Array.from({ length: 50 }, (_, i) => a.post(JSON.stringify(tree.validRequest({ output_name: `lora${i}` })))),
    );
    const bodies = await Promise.all(responses.map(async (r) => ({ status: r.status, body: (await r.json()) as any, retry: r.headers.get("retry-after") })));
    const winners = bodies.filter((b) => b.status === 200);
    expect(winners.length).toBe(1);
    const winner = winners[0]!.body.worker_job_id;
    for (const loser of bodies.filter((b) => b.status !== 200)) {
      expect(loser).toEqual({ status: 409, retry: "30", body: { detail: expect.any(String), reason: "busy", active_job_id: winner } });
    }
    // Only the winner's claim made a job directory (a job cancelled before its trainer runs keeps none).
    expect(readdirSync(join(tree.state, "jobs"))).toEqual([winner]);
    const cancelled = (await (await a.app.request(`/train/${winner}/cancel`, { method: "POST" })).json()) as any;
    expect(cancelled).toMatchObject({ worker_job_id: winner, status: "cancelled" });
    expect(jobRows(tree)).toBe(1);
  });

  // Nobody follows these jobs, so the worker's own look at the log is seconds away: only the answer's read shows
  // the step. Each route is asked first, right after the trainer wrote its third step.
  const fresh: Array<[string, (a: ReturnType<typeof appFor>, id: string) => Promise<number>]> = [
    ["GET /train/{id}", async (a, id) => (await a.json(`/train/${id}`)).body.step],
    ["GET /train", async (a) => (await a.json("/train")).body.jobs[0].step],
    ["GET /metrics", async (a, id) => {
      const text = await (await a.app.request("/metrics")).text();
      return Number(new RegExp(`^lora_worker_active_job_step\\{job_id="${id}"\\} (\\d+)$`, "m").exec(text)?.[1]);
    }],
  ];
  for (const [route, ask] of fresh) {
    test(`${route} shows the step the trainer has just written`, async () => {
      using tree = makeHostTree();
      const trainer = join(TRAINERS, "holds-last-bar.sh");
      await using a = inProcessApp(tree, realModeConfig(tree, trainer), [trainer]);
      const id = (await (await a.post(JSON.stringify(tree.validRequest()))).json() as any).worker_job_id as string;
      const log = a.store.get(id)!.log_path;
      await waitFor(() => existsSync(log) && readFileSync(log, "utf8").includes("3/400"), "the trainer's third step");
      // Contrast: what the worker knew before the answer asked (the trainer's first words are not on record).
      expect(a.store.get(id)!.status).toBe("starting");
      expect(await ask(a, id)).toBe(3);
    });
  }
});
