import type { Context } from "hono";
import { streamSSE, type SSEStreamingApi } from "hono/streaming";
import type { JobFeeds, Snapshot } from "./job-feed.ts";

// Events are snapshots of the job view, so a resumed stream needs no replay: it starts from the
// current state with ids that keep counting from the client's Last-Event-ID.
// Snapshots count up; the end alone has this id, so a reconnect naming it has seen the whole job.
export const END_EVENT_ID = "end";
const HEARTBEAT = ": heartbeat\n\n";

// As hono's writeSSE lays out an event; JSON holds no raw line break, so the data is one `data:` line.
const frame = (event: "job" | "end", id: string, data: string) => `event: ${event}\ndata: ${data}\nid: ${id}\n\n`;

export function jobEvents(c: Context, feeds: JobFeeds, id: string) {
  const lastEventId = c.req.header("last-event-id");
  const first = feeds.snapshot(id);
  // 204 is the one answer that stops every conforming EventSource from reconnecting (HTML §9.2).
  if (lastEventId === END_EVENT_ID && first.over) return c.body(null, 204);
  const lastSeen = Number.parseInt(lastEventId ?? "0", 10);
  let seq = Number.isSafeInteger(lastSeen) && lastSeen > 0 ? lastSeen : 0;
  return streamSSE(c, async (stream) => {
    const send = (snapshot: Snapshot) => stream.write(frame("job", String(++seq), snapshot.data));
    const wrote = send(first);
    const final = first.over ? first : await following(stream, feeds, id, send);
    await wrote;
    if (final && !stream.aborted) await stream.write(frame("end", END_EVENT_ID, final.data));
  });
}

// Subscribed in the same tick as the first snapshot was read, so no change falls between them.
function following(stream: SSEStreamingApi, feeds: JobFeeds, id: string, send: (s: Snapshot) => Promise<unknown>): Promise<Snapshot | null> {
  return new Promise((resolve) => {
    const leave = feeds.follow(id, { next: (s) => void send(s), heartbeat: () => void stream.write(HEARTBEAT), end: resolve });
    stream.onAbort(() => {
      leave();
      resolve(null);
    });
  });
}
