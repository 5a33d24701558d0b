import { Hono, type MiddlewareHandler } from "hono";
import { HTTPException } from "hono/http-exception";
import { bearerAuth } from "./bearer-auth.ts";
import type { Logger } from "../log/logger.ts";
import type { JobStore } from "../store/job-store.ts";
import { ApiError } from "./api-error.ts";
import { createHttpMetrics } from "./metrics/http-metrics.ts";
import { statusPageRoutes } from "./status-page/index.ts";
import { systemRoutes, type SystemRouteDeps } from "./system-routes.ts";
import { trainRoutes, type TrainRouteDeps } from "./train-routes.ts";

export interface AppDeps extends SystemRouteDeps, TrainRouteDeps {
  store: JobStore;
  log: Logger;
}

const ROUTES: Array<[string, string[]]> = [
  ["/train", ["GET", "POST"]],
  ["/train/:id", ["GET"]],
  ["/train/:id/log", ["GET"]],
  ["/train/:id/events", ["GET"]],
  ["/train/:id/metrics", ["GET"]],
  ["/train/:id/cancel", ["POST"]],
  ["/gpu-status", ["GET"]],
  ["/metrics", ["GET"]],
  ["/openapi.json", ["GET"]],
  ["/", ["GET"]],
  ["/healthz", ["GET"]],
];

// A refused request's body is never read (a 401 comes before it): close rather than let the server drain it.
const closeIfBodyUnread: MiddlewareHandler = async (c, next) => {
  await next();
  if (c.req.raw.body !== null && !c.req.raw.bodyUsed) c.header("Connection", "close");
};

export function createApp(deps: AppDeps) {
  const app = new Hono();
  const httpMetrics = createHttpMetrics();
  app.use("*", httpMetrics.middleware);
  app.use("*", closeIfBodyUnread);
  app.use("*", bearerAuth(deps.auth));
  app.route("/train", trainRoutes(deps));
  app.route("/", systemRoutes({ ...deps, httpMetrics }));
  app.route("/", statusPageRoutes());
  for (const [path, methods] of ROUTES) {
    app.all(path, (c) => c.json({ detail: `method ${c.req.method} not allowed on ${path}; allowed: ${methods.join(", ")}` }, 405, { Allow: methods.join(", ") }));
  }
  app.notFound((c) => c.json({ detail: "not found" }, 404));
  app.onError((err, c) => {
    if (err instanceof ApiError) return c.json(err.body, err.status, err.headers);
    if (err instanceof HTTPException) return c.json({ detail: err.message }, err.status);
    // Headers are not logged: one of them may carry a bearer token.
    deps.log.error("unhandled error", { method: c.req.method, path: c.req.path, error: String(err), stack: (err as Error).stack });
    return c.json({ detail: "internal error; see the worker's log" }, 500);
  });
  return app;
}
