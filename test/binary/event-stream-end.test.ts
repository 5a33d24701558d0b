import { beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { connect } from "node:net";
import { ensureBinary } from "../support/binary.ts";
import { SIMULATE_TABLES, makeHostTree } from "../support/host-tree.ts";
import { startWorker, type WorkerProcess } from "../support/worker-process.ts";

// Real processes on a shared 2-core machine: generous bounds, conditions waited on, never slept.
setDefaultTimeout(60_000);

let binary: string;
beforeAll(() => {
  binary = ensureBinary();
}, 120_000);

interface SseEvent {
  id: string;
  event: string;
  status: string;
}

// Reads the stream to its end, as an EventSource would, keeping each event's id, name and job status.
async function readStream(worker: WorkerProcess, id: string, lastEventId?: string): Promise<{ status: number; events: SseEvent[] }> {
  const res = await worker.request(`/train/${id}/events`, { headers: lastEventId === undefined ? {} : { "Last-Event-ID": lastEventId } });
  const blocks = (await res.text()).split("\n\n").filter((block) => block.includes("data:"));
  const events = blocks.map((block) => {
    const field = (name: string) => block.split("\n").find((l) => l.startsWith(`${name}:`))?.slice(name.length + 1).trim() ?? "";
    return { id: field("id"), event: field("event"), status: JSON.parse(field("data")).status };
  });
  return { status: res.status, events };
}

// One HTTP/1.1 request on its own socket, read to the close: the status line and headers exactly as sent.
function rawGet(url: string, path: string, headers: Record<string, string>): Promise<string> {
  const { hostname, port, host } = new URL(url);
  const request = [`GET ${path} HTTP/1.1`, `Host: ${host}`, ...Object.entries(headers).map(([k, v]) => `${k}: ${v}`), "Connection: close", "", ""].join("\r\n");
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname, () => socket.write(request));
    let text = "";
    socket.setEncoding("utf8");
    socket.on("data", (chunk) => (text += chunk));
    socket.on("end", () => resolve(text));
    socket.on("error", reject);
  });
}

describe("GET /train/{id}/events after the job's end", () => {
  test("a reconnect naming the end event is 204 No Content; one naming an earlier event, or none, gets the final snapshot and end", async () => {
    using tree = makeHostTree();
    await using worker = await startWorker(tree.writeConfig(SIMULATE_TABLES(0.002)), { command: [binary] });
    const id = (await worker.postTrain(tree.validRequest())).body.worker_job_id;
    const live = await readStream(worker, id);
    const end = live.events.at(-1)!;
    const lastSnapshot = live.events.at(-2)!;
    expect(live.status).toBe(200);
    expect(end).toEqual({ id: expect.any(String), event: "end", status: "succeeded" });
    expect(lastSnapshot.event).toBe("job");

    const reconnect = await rawGet(worker.url, `/train/${id}/events`, { Accept: "text/event-stream", "Last-Event-ID": end.id });
    const [head, body] = reconnect.split("\r\n\r\n");
    expect(head!.split("\r\n")[0]).toBe("HTTP/1.1 204 No Content");
    expect(head).not.toMatch(/content-type/i);
    expect(body).toBe("");

    // The contrasts: a client that lost the connection before the end, and one that opens the finished job afresh.
    expect(await readStream(worker, id, lastSnapshot.id)).toEqual({
      status: 200,
      events: [
        { id: String(Number(lastSnapshot.id) + 1), event: "job", status: "succeeded" },
        { id: end.id, event: "end", status: "succeeded" },
      ],
    });
    expect(await readStream(worker, id)).toEqual({
      status: 200,
      events: [
        { id: "1", event: "job", status: "succeeded" },
        { id: end.id, event: "end", status: "succeeded" },
      ],
    });
  });
});
