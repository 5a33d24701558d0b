import type { Context } from "hono";
import { isActive } from "../job.ts";
import type { Job } from "../store/job-store.ts";
import type { Supervisor } from "../supervisor/index.ts";

// GET /train/{id}/events: the job's feed (one watcher per job, below) written to each of its streams.
// Events are snapshots of the job view, so a resumed stream needs no replay: it starts from the
// current state with ids that keep counting from the client's Last-Event-ID.

const EVENT_MIN_INTERVAL_MS = 250;
const HEARTBEAT_MS = 15_000;
// Snapshots count up; the end alone has this id, so a reconnect naming it has seen the whole job.
export const END_EVENT_ID = "end";
const HEARTBEAT = ": heartbeat\n\n";
const HEADERS = { "content-type": "text/event-stream", "cache-control": "no-cache", connection: "keep-alive" };

// An event as hono's writeSSE lays it out; JSON holds no raw line break, so the data is one `data:` line. All but
// the id is the same for every stream of a job: encoded once per snapshot and copied to each socket as bytes.
const encoder = new TextEncoder();
const framed = new WeakMap<Frame, Uint8Array>();
function encoded(frame: Frame): Uint8Array {
  let bytes = framed.get(frame);
  if (bytes === undefined) framed.set(frame, (bytes = encoder.encode(`event: job\ndata: ${frame.data}\nid: `)));
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
      const send = (frame: Frame) => write(encoded(frame), `${++seq}\n\n`);
      const end = (final: Frame | null) => {
        if (final) write(`event: end\ndata: ${final.data}\nid: ${END_EVENT_ID}\n\n`);
        open = false;
        sink.close();
      };
      // The first snapshot is read in the same tick as the stream subscribes, so no change falls between them.
      const first = feeds.snapshot(id);
      send(first);
      if (first.over) return end(first);
      return new Promise<void>((resolve) => {
        const finish = (final: Frame | null) => {
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

// The job's view as sent: serialised once, written as is by every stream of the job.
export interface Frame {
  over: boolean;
  data: string;
}

interface Subscriber {
  next(frame: Frame): void;
  heartbeat(): void;
  // The job is over (its final snapshot), or its record could not be read (null).
  end(final: Frame | null): void;
}

interface JobFeedDeps {
  supervisor: Pick<Supervisor, "watch" | "isRunning">;
  // The job's record and its answer as serialised for GET /train/{id}.
  answer: (id: string) => { job: Job; json: string };
}

interface Feed {
  subscribers: Set<Subscriber>;
  lastSent: number;
  timer: Timer | null;
  heartbeat: Timer;
  unwatch: () => void;
}

type JobFeeds = ReturnType<typeof createJobFeeds>;

// One watcher per job while it has streams: each change is read and serialised once, whatever the number of
// streams, at most once per EVENT_MIN_INTERVAL_MS; a comment line every HEARTBEAT_MS keeps proxies awake.
export function createJobFeeds({ supervisor, answer }: JobFeedDeps) {
  const feeds = new Map<string, Feed>();
  const snapshot = (id: string): Frame => {
    const { job, json } = answer(id);
    return { over: !isActive(job.status), data: json };
  };
  const close = (id: string, feed: Feed) => {
    feeds.delete(id);
    if (feed.timer) clearTimeout(feed.timer);
    clearInterval(feed.heartbeat);
    feed.unwatch();
  };
  // A read the database refused ends the job's streams, not the worker.
  const tick = (id: string, feed: Feed) => {
    feed.timer = null;
    feed.lastSent = Date.now();
    let next: Frame | null = null;
    try {
      next = snapshot(id);
    } catch {
      next = null;
    }
    if (next && !next.over) return feed.subscribers.forEach((s) => s.next(next));
    close(id, feed);
    feed.subscribers.forEach((s) => s.end(next));
  };
  const schedule = (id: string, feed: Feed) => {
    if (feed.timer !== null) return;
    const wait = Math.max(0, EVENT_MIN_INTERVAL_MS - (Date.now() - feed.lastSent));
    feed.timer = setTimeout(() => tick(id, feed), wait);
  };
  const open = (id: string): Feed => {
    const subscribers = new Set<Subscriber>();
    const feed: Feed = {
      subscribers, lastSent: Date.now(), timer: null,
      heartbeat: setInterval(() => subscribers.forEach((s) => s.heartbeat()), HEARTBEAT_MS),
      unwatch: supervisor.watch(id, () => schedule(id, feed)),
    };
    feeds.set(id, feed);
    return feed;
  };

  return {
    // The job's current snapshot, read afresh: a stream's first event.
    snapshot,

    // Follows an active job after `snapshot`; returns the unsubscribe, after which the last one out closes the watcher.
    follow(id: string, subscriber: Subscriber): () => void {
      const feed = feeds.get(id) ?? open(id);
      feed.subscribers.add(subscriber);
      // A job not yet (or no longer) run by the supervisor may change without a notice: look once more.
      if (!supervisor.isRunning(id)) schedule(id, feed);
      return () => {
        if (!feed.subscribers.delete(subscriber) || feed.subscribers.size > 0) return;
        if (feeds.get(id) === feed) close(id, feed);
      };
    },
  };
}
