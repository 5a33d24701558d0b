import { Hono, type MiddlewareHandler } from "hono";
import { HTTPException } from "hono/http-exception";
import { METHOD_NAME_ALL } from "hono/router";
import type { RouterRoute } from "hono/types";
import type { AuthGate } from "../auth/setup.ts";
import type { Logger } from "../logger.ts";
import type { JobStore } from "../store/job-store.ts";
import { ApiError } from "./errors.ts";
import { createHttpMetrics } from "./metrics.ts";
import { statusPageRoutes } from "./status-page.ts";
import { smokeRoutes } from "./smoke-routes.ts";
import { createJobViews } from "./job-view.ts";
import { systemRoutes, type SystemRouteDeps } from "./system-routes.ts";
import { trainRoutes, type TrainRouteDeps } from "./train-routes.ts";
import { datasetRoutes } from "./dataset-routes.ts";

export interface AppDeps extends SystemRouteDeps, TrainRouteDeps {
  store: JobStore;
  log: Logger;
}

const CHALLENGE = 'Bearer realm="lora-worker"';
const BEARER = /^Bearer +([^ ]+) *$/i;
// Set on every answer to a read-only token, so a page shown with one can leave out the buttons that act.
const ACCESS_HEADER = "X-Token-Access";

// What answers without a token: liveness and the status page's HTML (its data calls need the
// token) always, metrics only when the operator says so.
function isPublic(method: string, path: string, gate: AuthGate): boolean {
  if (method !== "GET" && method !== "HEAD") return false;
  return path === "/healthz" || path === "/" || (path === "/metrics" && gate.metricsPublic);
}

// Runs before any route, so a refused request is answered before its body is read.
function bearerAuth(gate: AuthGate): MiddlewareHandler {
  return async (c, next) => {
    const { tokens } = gate;
    if (tokens === null || isPublic(c.req.method, c.req.path, gate)) return next();
    const header = c.req.header("authorization");
    if (header === undefined) {
      const detail = "a bearer token is required: send Authorization: Bearer <token>";
      throw new ApiError(401, { detail }, { "WWW-Authenticate": CHALLENGE });
    }
    const presented = BEARER.exec(header)?.[1];
    if (presented !== undefined && tokens.matches(presented)) return next();
    if (presented !== undefined && gate.readTokens?.matches(presented)) return readOnly(c, next);
    const challenge = `${CHALLENGE}, error="invalid_token"`;
    throw new ApiError(401, { detail: "the bearer token is not valid" }, { "WWW-Authenticate": challenge });
  };
}

// A reader's token reads (every GET: the page's data, events, logs, files, /metrics) and acts on nothing.
const readOnly: MiddlewareHandler = async (c, next) => {
  const { method, path } = c.req;
  if (method !== "GET" && method !== "HEAD") {
    const detail = `this token may only read (it is one of auth.read_token_file); ${method} ${path} needs a token ` +
      "of auth.token_file";
    throw new ApiError(403, { detail }, { [ACCESS_HEADER]: "read" });
  }
  await next();
  c.header(ACCESS_HEADER, "read");
};

// A refused request's body is never read (a 401 comes before it): close rather than let the server drain it.
const closeIfBodyUnread: MiddlewareHandler = async (c, next) => {
  await next();
  if (c.req.raw.body !== null && !c.req.raw.bodyUsed) c.header("Connection", "close");
};

// Each route's path with the methods it answers, sorted for Allow, from Hono's own table (middleware is mounted
// for ALL).
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
  const views = createJobViews(deps.store, deps.supervisor);
  app.route("/train", trainRoutes({ ...deps, views }));
  app.route("/smoke", smokeRoutes(deps));
  app.route("/dataset", datasetRoutes(deps));
  app.route("/", systemRoutes({ ...deps, httpMetrics, views }));
  app.route("/", statusPageRoutes());
  for (const [path, methods] of methodsByPath(app.routes)) {
    const allow = methods.join(", ");
    app.all(path, (c) => {
      const detail = `method ${c.req.method} not allowed on ${path}; allowed: ${allow}`;
      return c.json({ detail }, 405, { Allow: allow });
    });
  }
  app.notFound((c) => c.json({ detail: "not found" }, 404));
  app.onError((err, c) => {
    if (err instanceof ApiError) return c.json(err.body, err.status, err.headers);
    if (err instanceof HTTPException) return c.json({ detail: err.message }, err.status);
    // Headers are not logged: one of them may carry a bearer token.
    const { method, path } = c.req;
    deps.log.error("unhandled error", { method, path, error: String(err), stack: (err as Error).stack });
    return c.json({ detail: "internal error; see the worker's log" }, 500);
  });
  return app;
}
