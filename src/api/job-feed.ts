import { isActive } from "../job.ts";
import type { JobRow } from "../store/job-store.ts";
import type { Supervisor } from "../supervisor/supervisor.ts";

export const EVENT_MIN_INTERVAL_MS = 250;
export const HEARTBEAT_MS = 15_000;

/** The job's view as sent: serialised once, written as is by every stream of the job. */
export interface Snapshot {
  over: boolean;
  data: string;
}

export interface Subscriber {
  next(snapshot: Snapshot): void;
  heartbeat(): void;
  /** The job is over (its final snapshot), or its record could not be read (null). */
  end(final: Snapshot | null): void;
}

export interface JobFeedDeps {
  supervisor: Pick<Supervisor, "watch" | "isRunning">;
  /** The job's record and its answer as serialised for GET /train/{id}. */
  answer: (id: string) => { row: JobRow; json: string };
}

interface Feed {
  subscribers: Set<Subscriber>;
  lastSent: number;
  timer: Timer | null;
  heartbeat: Timer;
  unwatch: () => void;
}

export type JobFeeds = ReturnType<typeof createJobFeeds>;

// One watcher per job while it has streams: each change is read and serialised once, whatever the number of
// streams, at most once per EVENT_MIN_INTERVAL_MS; a comment line every HEARTBEAT_MS keeps proxies awake.
export function createJobFeeds({ supervisor, answer }: JobFeedDeps) {
  const feeds = new Map<string, Feed>();
  const snapshot = (id: string): Snapshot => {
    const { row, json } = answer(id);
    return { over: !isActive(row.status), data: json };
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
    let next: Snapshot | null = null;
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
    if (feed.timer === null) feed.timer = setTimeout(() => tick(id, feed), Math.max(0, EVENT_MIN_INTERVAL_MS - (Date.now() - feed.lastSent)));
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
    /** The job's current snapshot, read afresh: a stream's first event. */
    snapshot,

    /** Follows an active job after `snapshot`; returns the unsubscribe, after which the last one out closes the watcher. */
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
