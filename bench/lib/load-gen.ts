// A wrk-like load generator, run as its own process so it never shares an event loop with what it measures.
// Raw HTTP/1.1 over keep-alive sockets, one request in flight per connection (no pipelining).
//   closed: `connections` sockets each send, await the whole answer, send again, for `durationMs`
//           (answers during the first `warmupMs` are not counted)
//   burst:  open `connections` sockets, then send one request on each at the same moment
// Prints one JSON line: counts, status codes, elapsed time and latency percentiles in ms.
import { summarize } from "./stats.ts";

export interface LoadSpec {
  mode: "closed" | "burst";
  url: string;
  path: string;
  headers: Record<string, string>;
  connections: number;
  durationMs?: number;
  warmupMs?: number;
}

export interface LoadResult {
  requests: number;
  /** Answers including the warm-up's, to divide a server's CPU time by. */
  answered: number;
  statuses: Record<string, number>;
  elapsedMs: number;
  rps: number;
  latency: ReturnType<typeof summarize>;
}

const HEADER_END = "\r\n\r\n";

class Connection {
  private buffer = "";
  private sentAt = 0;
  socket: Awaited<ReturnType<typeof Bun.connect>> | null = null;

  constructor(private readonly request: string, private readonly onAnswer: (c: Connection, status: number, latencyMs: number) => void) {}

  send(): void {
    this.sentAt = performance.now();
    this.socket!.write(this.request);
  }

  // Content-Length framing only: every answer measured here (JSON, text) carries one.
  receive(chunk: string): void {
    this.buffer += chunk;
    const end = this.buffer.indexOf(HEADER_END);
    if (end < 0) return;
    const head = this.buffer.slice(0, end);
    const length = Number(/\r\ncontent-length:\s*(\d+)/i.exec(head)?.[1] ?? Number.NaN);
    if (Number.isNaN(length)) throw new Error(`an answer without Content-Length: ${head}`);
    if (this.buffer.length < end + HEADER_END.length + length) return;
    this.buffer = "";
    this.onAnswer(this, Number(head.slice(9, 12)), performance.now() - this.sentAt);
  }
}

async function open(spec: LoadSpec, onAnswer: (c: Connection, status: number, ms: number) => void): Promise<Connection[]> {
  const target = new URL(spec.url);
  const headerLines = Object.entries({ host: target.host, ...spec.headers }).map(([k, v]) => `${k}: ${v}\r\n`).join("");
  const request = `GET ${spec.path} HTTP/1.1\r\n${headerLines}\r\n`;
  return Promise.all(
    Array.from({ length: spec.connections }, async () => {
      const conn = new Connection(request, onAnswer);
      conn.socket = await Bun.connect({
        hostname: target.hostname,
        port: Number(target.port),
        socket: {
          data: (_s, data) => conn.receive(data.toString("latin1")),
          close: () => {
            if (conn.socket !== null) throw new Error("the server closed a keep-alive connection mid-run");
          },
          error: (_s, err) => {
            throw err;
          },
        },
      });
      return conn;
    }),
  );
}

export async function generateLoad(spec: LoadSpec): Promise<LoadResult> {
  const latencies: number[] = [];
  const statuses: Record<string, number> = {};
  const start = performance.now();
  const warmEnd = start + (spec.warmupMs ?? 0);
  const end = warmEnd + (spec.durationMs ?? 0);
  let pending = spec.connections;
  let done: () => void = () => {};
  const finished = new Promise<void>((resolve) => (done = resolve));
  let answered = 0;
  const onAnswer = (conn: Connection, status: number, latencyMs: number) => {
    const now = performance.now();
    answered++;
    if (spec.mode === "burst" || now >= warmEnd) {
      latencies.push(latencyMs);
      statuses[status] = (statuses[status] ?? 0) + 1;
    }
    if (spec.mode === "closed" && now < end) return conn.send();
    if (--pending === 0) done();
  };
  const conns = await open(spec, onAnswer);
  const measuredFrom = spec.mode === "burst" ? performance.now() : warmEnd;
  for (const conn of conns) conn.send();
  await finished;
  const elapsedMs = performance.now() - measuredFrom;
  for (const conn of conns) {
    const socket = conn.socket!;
    conn.socket = null;
    socket.end();
  }
  return { requests: latencies.length, answered, statuses, elapsedMs, rps: (latencies.length / elapsedMs) * 1000, latency: summarize(latencies) };
}

if (import.meta.main) {
  const spec = JSON.parse(process.argv[2] ?? "") as LoadSpec;
  console.log(JSON.stringify(await generateLoad(spec)));
  process.exit(0);
}
