import type { Context } from "hono";
import { streamSSE, type SSEStreamingApi } from "hono/streaming";
import { isActive } from "../job.ts";
import type { JobRow } from "../store/job-store.ts";
import type { Supervisor } from "../supervisor/supervisor.ts";

// Events are snapshots of the job view, so a resumed stream needs no replay: it starts from the
// current state with ids that keep counting from the client's Last-Event-ID.
export const EVENT_MIN_INTERVAL_MS = 250;
export const HEARTBEAT_MS = 15_000;
// Snapshots count up; the end alone has this id, so a reconnect naming it has seen the whole job.
export const END_EVENT_ID = "end";

export interface JobEventsDeps {
  supervisor: Supervisor;
  snapshot: () => { row: JobRow; view: unknown };
}

export function jobEvents(c: Context, deps: JobEventsDeps) {
  const lastEventId = c.req.header("last-event-id");
  // 204 is the one answer that stops every conforming EventSource from reconnecting (HTML §9.2).
  if (lastEventId === END_EVENT_ID && !isActive(deps.snapshot().row.status)) return c.body(null, 204);
  const lastSeen = Number.parseInt(lastEventId ?? "0", 10);
  let seq = Number.isSafeInteger(lastSeen) && lastSeen > 0 ? lastSeen : 0;
  return streamSSE(c, async (stream) => {
    const send = (event: "job" | "end", view: unknown) => stream.writeSSE({ id: event === "end" ? END_EVENT_ID : String(++seq), event, data: JSON.stringify(view) });
    // Sends the current state; says whether the job is over (then the caller sends "end").
    const tick = async () => {
      const { row, view } = deps.snapshot();
      const over = !isActive(row.status);
      if (!over) await send("job", view);
      return over;
    };
    const first = deps.snapshot();
    await send("job", first.view);
    if (isActive(first.row.status)) await followUntilEnd(stream, deps.supervisor, first.row.id, tick);
    if (!stream.aborted) await send("end", deps.snapshot().view);
  });
}

// One event per change, at most one per EVENT_MIN_INTERVAL_MS; a comment line keeps proxies awake.
function followUntilEnd(stream: SSEStreamingApi, supervisor: Supervisor, id: string, tick: () => Promise<boolean>): Promise<void> {
  return new Promise((resolve) => {
    let lastSent = Date.now();
    let timer: Timer | null = null;
    let ended = false;
    const finish = () => {
      if (ended) return;
      ended = true;
      if (timer) clearTimeout(timer);
      clearInterval(heartbeat);
      unwatch();
      resolve();
    };
    // A write to a stream whose client left, or a read the database refused, ends this stream, not the worker.
    const flush = async () => {
      timer = null;
      lastSent = Date.now();
      try {
        if (!ended && (await tick())) finish();
      } catch {
        finish();
      }
    };
    const unwatch = supervisor.watch(id, () => {
      if (timer === null && !ended) timer = setTimeout(flush, Math.max(0, EVENT_MIN_INTERVAL_MS - (Date.now() - lastSent)));
    });
    const heartbeat = setInterval(() => void stream.write(": heartbeat\n\n").catch(finish), HEARTBEAT_MS);
    stream.onAbort(finish);
    // The job may have ended between the first snapshot and the subscription.
    if (!supervisor.isRunning(id)) void flush();
  });
}
