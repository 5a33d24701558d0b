import { Hono, type MiddlewareHandler } from "hono";
import { HTTPException } from "hono/http-exception";
import { METHOD_NAME_ALL } from "hono/router";
import type { RouterRoute } from "hono/types";
import type { Logger } from "../logger.ts";
import type { JobStore } from "../store/job-store.ts";
import { bearerAuth } from "./auth.ts";
import { ApiError } from "./errors.ts";
import { createHttpMetrics } from "./metrics.ts";
import { statusPageRoutes } from "./status-page.ts";
import { systemRoutes, type SystemRouteDeps } from "./system-routes.ts";
import { trainRoutes, type TrainRouteDeps } from "./train-routes.ts";

export interface AppDeps extends SystemRouteDeps, TrainRouteDeps {
  store: JobStore;
  log: Logger;
}

// A refused request's body is never read (a 401 comes before it): close rather than let the server drain it.
const closeIfBodyUnread: MiddlewareHandler = async (c, next) => {
  await next();
  if (c.req.raw.body !== null && !c.req.raw.bodyUsed) c.header("Connection", "close");
};

// Each route's path with the methods it answers, sorted for Allow, from Hono's own table (middleware is mounted for ALL).
function methodsByPath(routes: readonly RouterRoute[]): Map<string, string[]> {
  const table = new Map<string, Set<string>>();
  for (const { method, path } of routes) {
    if (method !== METHOD_NAME_ALL) table.set(path, (table.get(path) ?? new Set()).add(method));
  }
  return new Map([...table].map(([path, methods]) => [path, [...methods].sort()]));
}

export function createApp(deps: AppDeps) {
  const app = new Hono();
  const httpMetrics = createHttpMetrics();
  app.use("*", httpMetrics.middleware);
  app.use("*", closeIfBodyUnread);
  app.use("*", bearerAuth(deps.auth));
  app.route("/train", trainRoutes(deps));
  app.route("/", systemRoutes({ ...deps, httpMetrics }));
  app.route("/", statusPageRoutes());
  for (const [path, methods] of methodsByPath(app.routes)) {
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
