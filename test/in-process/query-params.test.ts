import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import { inProcessApp } from "../support/app-harness.ts";
import { makeHostTree, type HostTree } from "../support/host-tree.ts";
import { TRAINERS, realModeConfig } from "../support/real-mode.ts";

// A status, or what the ended jobs are looked through for: the paused ones and the resumable ones.
const STATUSES = "starting, training, succeeded, failed, cancelled, paused, resumable";
const refusal = (name: string, msg: string) => ({ detail: [{ loc: ["query", name], msg, type: "value_error" }] });

function appFor(tree: HostTree) {
  const trainer = join(TRAINERS, "exit-zero-without-file.sh");
  return inProcessApp(tree, realModeConfig(tree, trainer), [trainer]);
}

// One finished job, so the routes under /train/{id} reach their query parameters.
async function finishedJob(a: ReturnType<typeof appFor>, tree: HostTree): Promise<string> {
  const body = JSON.stringify(tree.validRequest());
  const id: string = (await a.json("/train", { method: "POST", headers: { "content-type": "application/json" }, body })).body.worker_job_id;
  await a.supervisor.untilIdle();
  return id;
}

describe("query parameters", () => {
  test("bad values answer one 422 naming every bad parameter in the schema's order, and only plain digits count as an integer", async () => {
    using tree = makeHostTree();
    await using a = appFor(tree);
    const id = await finishedJob(a, tree);
    const cases: Array<[string, number, unknown]> = [
      ["/train?limit=0", 422, refusal("limit", "must be an integer from 1 to 100")],
      ["/train?limit=101", 422, refusal("limit", "must be an integer from 1 to 100")],
      ["/train?limit=1e1", 422, refusal("limit", "must be an integer from 1 to 100")],
      ["/train?limit=%205", 422, refusal("limit", "must be an integer from 1 to 100")],
      ["/train?limit=99999999999999999999", 422, refusal("limit", "must be an integer from 1 to 100")],
      ["/train?status=done", 422, refusal("status", `must be one of ${STATUSES}`)],
      ["/train?cursor=bogus", 422, refusal("cursor", "is not a cursor this worker handed out")],
      ["/train?cursor=bogus&limit=0&status=done", 422, { detail: [
        ...refusal("status", `must be one of ${STATUSES}`).detail,
        ...refusal("limit", "must be an integer from 1 to 100").detail,
        ...refusal("cursor", "is not a cursor this worker handed out").detail,
      ] }],
      ["/train?cursor=bogus&limit=0", 422, { detail: [
        ...refusal("limit", "must be an integer from 1 to 100").detail,
        ...refusal("cursor", "is not a cursor this worker handed out").detail,
      ] }],
      [`/train/${id}/log?lines=5001`, 422, refusal("lines", "must be an integer from 1 to 5000")],
      [`/train/${id}/log?lines=`, 422, refusal("lines", "must be an integer from 1 to 5000")],
      [`/train/${id}/metrics?max_points=2`, 422, refusal("max_points", "must be an integer from 3 to 10000")],
      [`/train/${id}/metrics?max_points=0x10`, 422, refusal("max_points", "must be an integer from 3 to 10000")],
    ];
    const answers = await Promise.all(cases.map(async ([path]) => [path, ...Object.values(await a.json(path))]));
    expect(answers).toEqual(cases);
    // Contrast: the same parameters in range are accepted, leading zeros included.
    expect((await a.json("/train?limit=007&status=failed")).body.jobs.length).toBe(1);
    expect((await a.app.request(`/train/${id}/log?lines=5000`)).status).toBe(200);
    expect((await a.json(`/train/${id}/metrics?max_points=3`)).status).toBe(200);
  });

  test("the OpenAPI document gives each query parameter the bounds and default the routes enforce", async () => {
    using tree = makeHostTree();
    await using a = appFor(tree);
    const doc = (await a.json("/openapi.json")).body;
    const query = (path: string) => doc.paths[path].get.parameters.filter((p: any) => p.in === "query");
    expect(query("/train")).toEqual([
      { name: "status", in: "query", schema: { type: "string", enum: STATUSES.split(", ") } },
      { name: "limit", in: "query", schema: { type: "integer", minimum: 1, maximum: 100, default: 20 } },
      { name: "cursor", in: "query", schema: { type: "string" } },
    ]);
    expect(query("/train/{id}/log")).toEqual([
      { name: "lines", in: "query", schema: { type: "integer", minimum: 1, maximum: 5000, default: 200 } },
      {
        name: "after",
        in: "query",
        schema: {
          type: "string",
          pattern: "^(0|[0-9a-f]{16})\\.(0|[1-9]\\d{0,14})$",
          description: "the x-log-cursor of an earlier answer: answers what the log gained since, instead of its last lines",
        },
      },
    ]);
    expect(query("/train/{id}/metrics")).toEqual([{ name: "max_points", in: "query", schema: { type: "integer", minimum: 3, maximum: 10000, default: 500 } }]);
  });
});

describe("405", () => {
  test("every documented path refuses an undocumented method with Allow naming exactly the documented ones", async () => {
    using tree = makeHostTree();
    await using a = appFor(tree);
    const id = await finishedJob(a, tree);
    const doc = (await a.json("/openapi.json")).body;
    const seen = await Promise.all(
      Object.keys(doc.paths).map(async (path) => {
        const res = await a.app.request(path.replace("{id}", id), { method: "PUT" });
        return [path, res.status, res.headers.get("allow"), ((await res.json()) as { detail: string }).detail];
      }),
    );
    const expected = Object.entries<any>(doc.paths).map(([path, item]) => {
      const allow = Object.keys(item).map((m) => m.toUpperCase()).sort().join(", ");
      return [path, 405, allow, `method PUT not allowed on ${path.replace(/\{(\w+)\}/g, ":$1")}; allowed: ${allow}`];
    });
    expect(seen).toEqual(expected);
  });
});
