import { ClientError } from "./exit.ts";
import type { JobView, WorkerClient } from "./worker-client.ts";

// Server-Sent Events framing (WHATWG HTML §9.2.6): lines end in CRLF, LF or CR; a blank line dispatches;
// `:` starts a comment; fields `event`, `data` (joined by LF), `id`, `retry`. A CR at the end of a chunk
// may be the first half of a CRLF, so it is held until the next chunk says.

type SseItem =
  | { kind: "event"; event: string; data: string; id: string | null }
  | { kind: "comment"; text: string }
  | { kind: "retry"; ms: number };

export class SseParser {
  private buffer = "";
  private event = "";
  private data: string[] = [];
  private id: string | null = null;

  push(chunk: string): SseItem[] {
    this.buffer += chunk;
    const items: SseItem[] = [];
    for (;;) {
      const end = this.buffer.search(/\r\n|\n|\r/);
      if (end === -1 || (this.buffer[end] === "\r" && end === this.buffer.length - 1)) break;
      const line = this.buffer.slice(0, end);
      this.buffer = this.buffer.slice(end + (this.buffer.startsWith("\r\n", end) ? 2 : 1));
      const item = this.line(line);
      if (item) items.push(item);
    }
    return items;
  }

  private line(line: string): SseItem | null {
    if (line === "") return this.dispatch();
    if (line.startsWith(":")) return { kind: "comment", text: line.slice(1).trimStart() };
    const colon = line.indexOf(":");
    const field = colon === -1 ? line : line.slice(0, colon);
    const value = colon === -1 ? "" : line.slice(colon + 1).replace(/^ /, "");
    if (field === "event") this.event = value;
    else if (field === "data") this.data.push(value);
    else if (field === "id" && !value.includes("\0")) this.id = value;
    else if (field === "retry" && /^\d+$/.test(value)) return { kind: "retry", ms: Number(value) };
    return null;
  }

  private dispatch(): SseItem | null {
    const item: SseItem | null = this.data.length === 0
      ? null
      : { kind: "event", event: this.event || "message", data: this.data.join("\n"), id: this.id };
    this.event = "";
    this.data = [];
    return item;
  }
}

export type JobEvent = { kind: "job" | "end"; view: JobView } | { kind: "heartbeat" };

interface StreamTiming {
  // No byte for this long (three missed 15 s heartbeats) means the connection is dead.
  idleMs: number;
  // Reconnecting gives up once the worker has been unreachable this long.
  maxOutageMs: number;
  firstRetryMs: number;
  maxRetryMs: number;
}

const STREAM_TIMING: StreamTiming = {
  idleMs: 45_000,
  maxOutageMs: 60_000,
  firstRetryMs: 250,
  maxRetryMs: 5_000,
};

// A job's event stream that survives a dropped connection or a worker restart: it reconnects with
// Last-Event-ID and ends after the `end` event. A refusal (401, 404) is not retried.
export async function* jobEvents(
  client: WorkerClient,
  id: string,
  timing: StreamTiming = STREAM_TIMING,
): AsyncGenerator<JobEvent> {
  const first = timing.firstRetryMs;
  const state: StreamState = { lastId: null, baseRetryMs: first, retryMs: first, outageSince: null };
  for (;;) {
    if (yield* oneConnection(client, id, state, timing)) return;
    state.outageSince ??= Date.now();
    if (Date.now() - state.outageSince > timing.maxOutageMs) {
      const seconds = Math.round(timing.maxOutageMs / 1000);
      throw new ClientError("unreachable", `lost the event stream of job ${id} at ${client.url} for over ${seconds} s`);
    }
    await Bun.sleep(state.retryMs);
    state.retryMs = Math.min(state.retryMs * 2, timing.maxRetryMs);
  }
}

// The caller has just read the job, so a 404 here is the stream route missing, not the job.
export async function* eventsOf(client: WorkerClient, id: string): AsyncGenerator<JobEvent> {
  try {
    yield* jobEvents(client, id);
  } catch (err) {
    if (err instanceof ClientError && err.kind === "no_such_job") {
      throw new ClientError(
        "refused",
        `this worker has no event stream (GET /train/${id}/events answered 404); ` +
          "upgrade it or use status without --follow",
      );
    }
    throw err;
  }
}

interface StreamState {
  lastId: string | null;
  // The server's `retry:` if it sent one.
  baseRetryMs: number;
  retryMs: number;
  outageSince: number | null;
}

// Yields the events of one connection; true once the stream ended with `end`, false when it dropped.
async function* oneConnection(
  client: WorkerClient,
  id: string,
  state: StreamState,
  timing: StreamTiming,
): AsyncGenerator<JobEvent, boolean> {
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
    const sent = item.data.slice(0, 200);
    throw new ClientError("refused", `the worker sent a ${item.event} event that is not JSON: ${sent}`);
  }
}
