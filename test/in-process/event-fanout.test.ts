import { describe, expect, setDefaultTimeout, test } from "bun:test";
import { Hono } from "hono";
import { createJobFeeds, jobEvents } from "../../src/api/events.ts";
import { jobView } from "../../src/api/job-view.ts";
import { makeHostTree } from "../support/host-tree.ts";
import { SIMULATOR, simulateModeConfig, supervisorFor } from "../support/real-mode.ts";
import { waitFor } from "../support/wait.ts";

setDefaultTimeout(60_000);

const STREAMS = 8;

// The events route over a real supervisor, store and simulated trainer, with the view's builds and the
// supervisor's watchers counted where the feed takes them in.
async function fanoutHarness(secondsPerStep: number) {
  const tree = makeHostTree();
  const s = supervisorFor(tree, simulateModeConfig(tree, { seconds_per_step: secondsPerStep }), SIMULATOR);
  const counts = { builds: 0, watchers: 0 };
  const supervisor = {
    isRunning: (id: string) => s.supervisor.isRunning(id),
    watch(id: string, watcher: () => void) {
      counts.watchers++;
      const unwatch = s.supervisor.watch(id, watcher);
      return () => {
        counts.watchers--;
        unwatch();
      };
    },
  };
  const feeds = createJobFeeds({ supervisor, answer: (id) => {
    counts.builds++;
    const { job, live } = s.supervisor.fresh((live) => ({ job: s.store.get(id)!, live: live(id) }));
    return { job, json: JSON.stringify(jobView(job, live)) };
  } });
  const app = new Hono().get("/:id/events", (c) => jobEvents(c, feeds, c.req.param("id")));
  const result = await s.dispatcher.dispatch(tree.validRequest(), null);
  if (!result.ok) throw new Error(`dispatch refused: ${JSON.stringify(result)}`);
  return {
    app, counts, id: result.value.id,
    async [Symbol.asyncDispose]() {
      await s[Symbol.asyncDispose]();
      tree[Symbol.dispose]();
    },
  };
}

const dataLines = (text: string) => text.split("\n").filter((l) => l.startsWith("data:"));
const ids = (text: string) => text.split("\n").filter((l) => l.startsWith("id:")).map((l) => l.slice(4));

describe("event streams of one job share one snapshot per change", () => {
  test("eight streams receive byte-identical events and each change is read and serialised once for all of them", async () => {
    await using h = await fanoutHarness(0.005);
    // Opened in one tick, before any change can be sent; one resumes after event 41.
    const responses = await Promise.all(
      Array.from({ length: STREAMS }, (_, i) => h.app.request(`/${h.id}/events`, { headers: i === 0 ? { "Last-Event-ID": "41" } : {} })),
    );
    const [resumed, ...fresh] = await Promise.all(responses.map((r) => r.text()));
    const events = dataLines(fresh[0]!).length;

    expect(new Set(fresh).size).toBe(1);
    expect(dataLines(resumed!)).toEqual(dataLines(fresh[0]!));
    expect(ids(fresh[0]!)).toEqual([...Array.from({ length: events - 1 }, (_, i) => String(i + 1)), "end"]);
    expect(ids(resumed!)).toEqual([...Array.from({ length: events - 1 }, (_, i) => String(i + 42)), "end"]);
    expect(JSON.parse(dataLines(fresh[0]!).at(-1)!.slice(5))).toMatchObject({ status: "succeeded", step: 400 });
    expect(events).toBeGreaterThan(2);
    // Each stream reads its own first snapshot; every later event is one read for all eight.
    // The contrast, a read per stream per change, would be STREAMS * events.
    expect(h.counts.builds).toBe(STREAMS + (events - 1));
    expect(h.counts.watchers).toBe(0);
  });

  test("a stream that leaves unsubscribes; the job's one watcher stays for the others and goes with the last", async () => {
    await using h = await fanoutHarness(0.05);
    const [a, b] = await Promise.all([h.app.request(`/${h.id}/events`), h.app.request(`/${h.id}/events`)]);
    // A stream subscribes as it is sent: the server starts sending at once, a reader here at its first read.
    const readerA = a!.body!.getReader();
    const readerB = b!.body!.getReader();
    await Promise.all([readerA.read(), readerB.read()]);
    expect(h.counts.watchers).toBe(1);

    await readerA.cancel();
    expect(h.counts.watchers).toBe(1);
    const decoder = new TextDecoder();
    let seen = "";
    await waitFor(async () => {
      seen += decoder.decode((await readerB.read()).value ?? new Uint8Array());
      return ids(seen).includes("3");
    }, "the remaining stream to keep receiving events");

    await readerB.cancel();
    expect(h.counts.watchers).toBe(0);
  });
});
