import { ClientError } from "./client-error.ts";
import { SseParser, type SseItem } from "./sse-parser.ts";
import type { JobView } from "./wire.ts";
import type { WorkerClient } from "./worker-client.ts";

export type JobEvent = { kind: "job" | "end"; view: JobView } | { kind: "heartbeat" };

export interface StreamTiming {
  /** No byte for this long (three missed 15 s heartbeats) means the connection is dead. */
  idleMs: number;
  /** Reconnecting gives up once the worker has been unreachable this long. */
  maxOutageMs: number;
  firstRetryMs: number;
  maxRetryMs: number;
}

export const STREAM_TIMING: StreamTiming = { idleMs: 45_000, maxOutageMs: 60_000, firstRetryMs: 250, maxRetryMs: 5_000 };

// A job's event stream that survives a dropped connection or a worker restart: it reconnects with
// Last-Event-ID and ends after the `end` event. A refusal (401, 404) is not retried.
export async function* jobEvents(client: WorkerClient, id: string, timing: StreamTiming = STREAM_TIMING): AsyncGenerator<JobEvent> {
  const state: StreamState = { lastId: null, baseRetryMs: timing.firstRetryMs, retryMs: timing.firstRetryMs, outageSince: null };
  for (;;) {
    if (yield* oneConnection(client, id, state, timing)) return;
    state.outageSince ??= Date.now();
    if (Date.now() - state.outageSince > timing.maxOutageMs) {
      throw new ClientError("unreachable", `lost the event stream of job ${id} at ${client.url} for over ${Math.round(timing.maxOutageMs / 1000)} s`);
    }
    await Bun.sleep(state.retryMs);
    state.retryMs = Math.min(state.retryMs * 2, timing.maxRetryMs);
  }
}

interface StreamState {
  lastId: string | null;
  /** The server's `retry:` if it sent one. */
  baseRetryMs: number;
  retryMs: number;
  outageSince: number | null;
}

/** Yields the events of one connection; true once the stream ended with `end`, false when it dropped. */
async function* oneConnection(client: WorkerClient, id: string, state: StreamState, timing: StreamTiming): AsyncGenerator<JobEvent, boolean> {
  const abort = new AbortController();
  let idle = setTimeout(() => abort.abort(), timing.idleMs);
  try {
    const res = await client.events(id, state.lastId, abort.signal);
    state.outageSince = null;
    state.retryMs = state.baseRetryMs;
    const parser = new SseParser();
    const decoder = new TextDecoder();
    for await (const chunk of res.body as ReadableStream<Uint8Array>) {
      clearTimeout(idle);
      idle = setTimeout(() => abort.abort(), timing.idleMs);
      for (const item of parser.push(decoder.decode(chunk, { stream: true }))) {
        const event = toEvent(item, state);
        if (event) yield event;
        if (event?.kind === "end") return true;
      }
    }
    return false;
  } catch (err) {
    if (err instanceof ClientError && err.kind !== "unreachable") throw err;
    return false;
  } finally {
    clearTimeout(idle);
    abort.abort();
  }
}

function toEvent(item: SseItem, state: StreamState): JobEvent | null {
  if (item.kind === "retry") state.baseRetryMs = state.retryMs = item.ms;
  if (item.kind === "comment") return { kind: "heartbeat" };
  if (item.kind !== "event" || (item.event !== "job" && item.event !== "end")) return null;
  if (item.id !== null) state.lastId = item.id;
  try {
    return { kind: item.event, view: JSON.parse(item.data) as JobView };
  } catch {
    throw new ClientError("refused", `the worker sent a ${item.event} event that is not JSON: ${item.data.slice(0, 200)}`);
  }
}
