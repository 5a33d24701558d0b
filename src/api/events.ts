import type { Context } from "hono";
import type { JobFeeds, Snapshot } from "./job-feed.ts";

// Events are snapshots of the job view, so a resumed stream needs no replay: it starts from the
// current state with ids that keep counting from the client's Last-Event-ID.
// Snapshots count up; the end alone has this id, so a reconnect naming it has seen the whole job.
export const END_EVENT_ID = "end";
const HEARTBEAT = ": heartbeat\n\n";
const HEADERS = { "content-type": "text/event-stream", "cache-control": "no-cache", connection: "keep-alive" };

// An event as hono's writeSSE lays it out; JSON holds no raw line break, so the data is one `data:` line. All but
// the id is the same for every stream of a job: encoded once per snapshot and copied to each socket as bytes.
const encoder = new TextEncoder();
const framed = new WeakMap<Snapshot, Uint8Array>();
function frameOf(snapshot: Snapshot): Uint8Array {
  let bytes = framed.get(snapshot);
  if (bytes === undefined) framed.set(snapshot, (bytes = encoder.encode(`event: job\ndata: ${snapshot.data}\nid: `)));
  return bytes;
}

// Written straight to the socket (Bun's direct stream): no queue and no copy per stream between the feed and the
// connection, which is what a thousand streams of one job cost.
export function jobEvents(c: Context, feeds: JobFeeds, id: string): Response {
  const lastEventId = c.req.header("last-event-id");
  // 204 is the one answer that stops every conforming EventSource from reconnecting (HTML §9.2).
  if (lastEventId === END_EVENT_ID && feeds.snapshot(id).over) return c.body(null, 204);
  const lastSeen = Number.parseInt(lastEventId ?? "0", 10);
  let seq = Number.isSafeInteger(lastSeen) && lastSeen > 0 ? lastSeen : 0;
  const signal = c.req.raw.signal;
  let leave = () => {};
  const body = new ReadableStream({
    type: "direct",
    cancel: () => leave(),
    pull(sink: ReadableStreamDirectController) {
      let open = true;
      // A client gone between two events makes the write fail; its abort or cancel then closes the stream.
      const write = (...parts: Array<string | Uint8Array>) => {
        if (!open) return;
        try {
          for (const part of parts) sink.write(part);
          sink.flush();
        } catch {
          open = false;
        }
      };
      const send = (snapshot: Snapshot) => write(frameOf(snapshot), `${++seq}\n\n`);
      const end = (final: Snapshot | null) => {
        if (final) write(`event: end\ndata: ${final.data}\nid: ${END_EVENT_ID}\n\n`);
        open = false;
        sink.close();
      };
      // The first snapshot is read in the same tick as the stream subscribes, so no change falls between them.
      const first = feeds.snapshot(id);
      send(first);
      if (first.over) return end(first);
      return new Promise<void>((resolve) => {
        const finish = (final: Snapshot | null) => {
          unsubscribe();
          signal.removeEventListener("abort", aborted);
          if (open) end(final);
          resolve();
        };
        const aborted = () => finish(null);
        const unsubscribe = feeds.follow(id, { next: send, heartbeat: () => write(HEARTBEAT), end: finish });
        leave = aborted;
        signal.addEventListener("abort", aborted, { once: true });
      });
    },
  });
  return c.body(body, 200, HEADERS);
}
