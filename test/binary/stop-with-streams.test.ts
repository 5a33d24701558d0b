import { Database } from "bun:sqlite";
import { beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { join } from "node:path";
import { ensureBinary } from "../support/binary.ts";
import { openEventStream } from "../support/event-stream.ts";
import { SIMULATE_TABLES, makeHostTree } from "../support/host-tree.ts";
import { isLive, killJobAtEnd, processesMarkedWith } from "../support/job-processes.ts";
import { waitFor, within } from "../support/wait.ts";
import { startWorker } from "../support/worker-process.ts";

// Item 11 of issue 11: under the unit, SIGTERM that waits on open event streams runs into TimeoutStopSec and
// ends in SIGKILL. The worker must close its streams and exit promptly; its trainings run on (KillMode=process).
setDefaultTimeout(120_000);

// Far below the 30 s+ that open streams used to hold a stop, above the worker's own 2 s bound for a loaded machine.
const STOP_BOUND_MS = 5000;

let binary: string;
beforeAll(() => {
  binary = ensureBinary();
}, 120_000);

function trainerPid(state: string, id: string): number | null {
  using db = new Database(join(state, "jobs.db"), { readonly: true });
  return db.query<{ pid: number | null }, [string]>("SELECT pid FROM jobs WHERE id = ?").get(id)?.pid ?? null;
}

describe("stopping with event streams open", () => {
  test("SIGTERM ends the worker within seconds while two event streams are open; the training runs on and the next worker adopts it", async () => {
    using tree = makeHostTree();
    const config = tree.writeConfig(SIMULATE_TABLES(0.1));
    let id: string | null = null;
    using _job = killJobAtEnd(() => id);
    await using first = await startWorker(config, { command: [binary] });
    const posted = await first.postTrain(tree.validRequest());
    expect(posted.status).toBe(200);
    const jobId: string = posted.body.worker_job_id;
    id = jobId;
    await waitFor(async () => (await first.json(`/train/${jobId}`)).body.step >= 1, "the training to be under way", 60_000);
    await using page = await openEventStream(`${first.url}/train/${jobId}/events`);
    await using follow = await openEventStream(`${first.url}/train/${jobId}/events`);

    // Contrast: with no signal sent, both streams stay open and keep delivering, and the worker runs on.
    const jobEvents = () => Math.min(...[page, follow].map((s) => s.events().filter((e) => e === "job").length));
    await waitFor(() => jobEvents() >= 3, "both streams to deliver three job events");
    expect([page.ending(), follow.ending()]).toEqual([null, null]);
    expect(first.proc.exitCode).toBeNull();

    const pid = await waitFor(() => trainerPid(tree.state, jobId), "the trainer's pid on record");
    const stepAtStop: number = (await first.json(`/train/${jobId}`)).body.step;
    const sentAt = performance.now();
    first.proc.kill("SIGTERM");
    expect(await within(first.proc.exited, STOP_BOUND_MS)).toBe(0);
    expect(performance.now() - sentAt).toBeLessThan(STOP_BOUND_MS);
    expect(first.output()).toContain(`"msg":"stopping","signal":"SIGTERM","active_job_id":"${jobId}"`);
    await waitFor(() => page.ending() !== null && follow.ending() !== null, "both streams to end", STOP_BOUND_MS);

    // The training outlived its worker, and the next worker on the same config follows it on.
    expect(isLive(pid)).toBe(true);
    expect(processesMarkedWith(jobId)).toContain(pid);
    await using second = await startWorker(config, { command: [binary] });
    const adopted = await waitFor(async () => {
      const job = (await second.json(`/train/${jobId}`)).body;
      return job.step > stepAtStop ? job : null;
    }, "the new worker to report the training's progress past the step it was at", 60_000);
    expect(adopted.status).toBe("training");
    expect((await second.json("/healthz")).body.active_job_id).toBe(jobId);

    const cancelled = await second.json(`/train/${jobId}/cancel`, { method: "POST" });
    expect(cancelled.status).toBe(200);
    expect(cancelled.body.status).toBe("cancelled");
    expect(processesMarkedWith(jobId)).toEqual([]);
  });

  test("contrast: a graceful server.stop() waits on an open event stream; stop(true) closes it at once", async () => {
    const server = Bun.serve({
      port: 0,
      hostname: "127.0.0.1",
      // One event, then silence: the stream stays open as long as the client reads.
      fetch: () => new Response(new ReadableStream({ start: (c) => c.enqueue(new TextEncoder().encode("event: job\ndata: {}\n\n")) }), { headers: { "content-type": "text/event-stream" } }),
    });
    await using stream = await openEventStream(`http://127.0.0.1:${server.port}/`);
    await waitFor(() => stream.events().length === 1, "the first event");

    expect(await within(server.stop(), 1000)).toBe("deadline");
    expect(stream.ending()).toBeNull();
    expect(await within(server.stop(true), 1000)).toBeUndefined();
    await waitFor(() => stream.ending(), "the stream to end", 1000);
  });
});
