import type { MiddlewareHandler } from "hono";
import { ApiError } from "./errors.ts";
import type { AuthGate } from "../auth/setup.ts";

const CHALLENGE = 'Bearer realm="lora-worker"';
const BEARER = /^Bearer +([^ ]+) *$/i;

// What answers without a token: liveness and the status page's HTML (its data calls need the
// token) always, metrics only when the operator says so.
export function isPublic(method: string, path: string, gate: AuthGate): boolean {
  if (method !== "GET" && method !== "HEAD") return false;
  return path === "/healthz" || path === "/" || (path === "/metrics" && gate.metricsPublic);
}

// Runs before any route, so a refused request is answered before its body is read.
export function bearerAuth(gate: AuthGate): MiddlewareHandler {
  return async (c, next) => {
    const { tokens } = gate;
    if (tokens === null || isPublic(c.req.method, c.req.path, gate)) return next();
    const header = c.req.header("authorization");
    if (header === undefined) {
      throw new ApiError(401, { detail: "a bearer token is required: send Authorization: Bearer <token>" }, { "WWW-Authenticate": CHALLENGE });
    }
    const presented = BEARER.exec(header)?.[1];
    if (presented === undefined || !tokens.matches(presented)) {
      throw new ApiError(401, { detail: "the bearer token is not valid" }, { "WWW-Authenticate": `${CHALLENGE}, error="invalid_token"` });
    }
    return next();
  };
}
