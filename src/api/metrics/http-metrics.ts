import type { MiddlewareHandler } from "hono";
import type { Family } from "./exposition.ts";

// Upper bounds in seconds: loopback answers live in the first few; cancel and gpu-status in the last.
const BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

interface RouteStats {
  counts: number[];
  sum: number;
  total: number;
}

// Requests and latency by route pattern (never by raw path: job ids would explode the series).
export function createHttpMetrics() {
  const requests = new Map<string, number>();
  const latency = new Map<string, RouteStats>();

  const observe = (method: string, route: string, status: number, seconds: number) => {
    const key = JSON.stringify([method, route, String(status)]);
    requests.set(key, (requests.get(key) ?? 0) + 1);
    const stats = latency.get(route) ?? { counts: BUCKETS.map(() => 0), sum: 0, total: 0 };
    BUCKETS.forEach((le, i) => {
      if (seconds <= le) stats.counts[i]! += 1;
    });
    stats.sum += seconds;
    stats.total += 1;
    latency.set(route, stats);
  };

  const middleware: MiddlewareHandler = async (c, next) => {
    const started = performance.now();
    await next();
    const route = c.req.routePath && c.req.routePath !== "*" && c.req.routePath !== "/*" ? c.req.routePath : "unmatched";
    observe(c.req.method, route, c.res.status, (performance.now() - started) / 1000);
  };

  const families = (): Family[] => [
    {
      name: "lora_worker_http_requests_total",
      help: "HTTP requests answered, by method, route pattern and status.",
      kind: "counter",
      samples: [...requests].map(([key, value]) => {
        const [method, route, status] = JSON.parse(key) as [string, string, string];
        return { labels: { method, route, status }, value };
      }),
    },
    {
      name: "lora_worker_http_request_duration_seconds",
      help: "Time to answer an HTTP request, by route pattern.",
      kind: "histogram",
      samples: [...latency].flatMap(([route, s]) => [
        ...BUCKETS.map((le, i) => ({ suffix: "_bucket", labels: { route, le: String(le) }, value: s.counts[i]! })),
        { suffix: "_bucket", labels: { route, le: "+Inf" }, value: s.total },
        { suffix: "_sum", labels: { route }, value: s.sum },
        { suffix: "_count", labels: { route }, value: s.total },
      ]),
    },
  ];

  return { middleware, families };
}

export type HttpMetrics = ReturnType<typeof createHttpMetrics>;
