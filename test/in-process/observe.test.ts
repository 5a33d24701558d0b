import { describe, expect, setDefaultTimeout, test } from "bun:test";
import { join } from "node:path";
import { downsample } from "../../src/api/loss-curve.ts";
import { inProcessApp } from "../support/app-harness.ts";
import { makeHostTree } from "../support/host-tree.ts";
import { SIMULATOR, TRAINERS, realModeConfig, simulateModeConfig } from "../support/real-mode.ts";

setDefaultTimeout(60_000);

interface SseEvent {
  id: string;
  event: string;
  data: any;
}

// Reads a text/event-stream to its end (the server closes it after "end").
async function readEvents(res: Response): Promise<SseEvent[]> {
  const text = await res.text();
  return text
    .split("\n\n")
    .filter((block) => block.includes("data:"))
    .map((block) => {
      const field = (name: string) => block.split("\n").find((l) => l.startsWith(`${name}:`))?.slice(name.length + 1).trim() ?? "";
      return { id: field("id"), event: field("event"), data: JSON.parse(field("data")) };
    });
}

describe("GET /train: recent jobs", () => {
  test("lists newest first, filters by status and pages with a cursor", async () => {
    using tree = makeHostTree();
    const trainer = join(TRAINERS, "exit-zero-without-file.sh");
    await using a = inProcessApp(tree, realModeConfig(tree, trainer), [trainer]);
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) {
      ids.push((await a.json("/train", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(tree.validRequest({ output_name: `l${i}` })) })).body.worker_job_id);
      await a.supervisor.untilIdle();
    }
    const seen: string[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const page: { status: number; body: any } = await a.json(`/train?limit=2${cursor ? `&cursor=${cursor}` : ""}`);
      expect(page.status).toBe(200);
      seen.push(...page.body.jobs.map((j: any) => j.worker_job_id));
      cursor = page.body.next_cursor;
      pages++;
    } while (cursor !== null);
    expect(seen).toEqual([...ids].reverse());
    expect(pages).toBe(3);
    expect((await a.json("/train?status=failed")).body.jobs.length).toBe(5);
    expect((await a.json("/train?status=succeeded")).body).toEqual({ jobs: [], next_cursor: null });
    expect((await a.json("/train?status=done")).status).toBe(422);
    expect((await a.json("/train?cursor=bogus")).status).toBe(422);
  });
});

describe("GET /train/{id}/events", () => {
  test("streams snapshots of a running job, rising, throttled, and ends with its final state", async () => {
    using tree = makeHostTree();
    await using a = inProcessApp(tree, simulateModeConfig(tree, { seconds_per_step: 0.005 }), SIMULATOR);
    const id = (await a.json("/train", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(tree.validRequest()) })).body.worker_job_id;
    const started = Date.now();
    const events = await readEvents(await a.app.request(`/train/${id}/events`));
    const elapsed = Date.now() - started;

    expect(events.map((e) => e.id)).toEqual([...events.slice(0, -1).map((_, i) => String(i + 1)), "end"]);
    expect(events.at(-1)).toMatchObject({ event: "end", data: { status: "succeeded", step: 400 } });
    const steps = events.filter((e) => e.event === "job").map((e) => e.data.step);
    expect(steps).toEqual([...steps].sort((x, y) => x - y));
    expect(new Set(steps).size).toBeGreaterThan(2);
    // At most one event per 250 ms after the first: a 400-step run must not become 400 events.
    expect(events.length).toBeLessThanOrEqual(Math.ceil(elapsed / 250) + 3);
  });

  test("a finished job answers its snapshot and end at once; snapshot ids resume after Last-Event-ID", async () => {
    using tree = makeHostTree();
    const trainer = join(TRAINERS, "exit-zero-without-file.sh");
    await using a = inProcessApp(tree, realModeConfig(tree, trainer), [trainer]);
    const id = (await a.json("/train", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(tree.validRequest()) })).body.worker_job_id;
    await a.supervisor.untilIdle();
    const events = await readEvents(await a.app.request(`/train/${id}/events`, { headers: { "Last-Event-ID": "41" } }));
    expect(events.map((e) => [e.id, e.event, e.data.status])).toEqual([
      ["42", "job", "failed"],
      ["end", "end", "failed"],
    ]);
  });
});

describe("GET /train/{id}/metrics", () => {
  test("gives the loss curve thinned to max_points, first and last step kept", async () => {
    using tree = makeHostTree();
    await using a = inProcessApp(tree, simulateModeConfig(tree, { seconds_per_step: 0 }), SIMULATOR);
    const id = (await a.json("/train", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(tree.validRequest()) })).body.worker_job_id;
    await a.supervisor.untilIdle();
    const full = (await a.json(`/train/${id}/metrics`)).body;
    expect(full.total_points).toBe(400);
    expect(full.points.length).toBe(400);
    const thin = (await a.json(`/train/${id}/metrics?max_points=10`)).body;
    expect(thin.points.length).toBe(10);
    expect([thin.points[0][0], thin.points.at(-1)[0]]).toEqual([1, 400]);
    expect((await a.json(`/train/${id}/metrics?max_points=2`)).status).toBe(422);
  });
});

describe("downsampling", () => {
  const curve: Array<[number, number]> = Array.from({ length: 1000 }, (_, i) => [i, i === 537 ? 5 : 1 / (1 + i / 100)]);

  test("keeps a lone spike that a plain stride would drop", () => {
    expect(downsample(curve, 50).some(([step]) => step === 537)).toBe(true);
  });

  test("contrast: taking every 20th point loses the spike", () => {
    expect(curve.filter((_, i) => i % 20 === 0).some(([step]) => step === 537)).toBe(false);
  });
});
