import type { Config } from "../config/schema.ts";
import { fail, ok, type CheckResult } from "./check-result.ts";

const HEALTHZ_TIMEOUT_MS = 2000;

export function splitListen(listen: string): { hostname: string; port: number } {
  const at = listen.lastIndexOf(":");
  return { hostname: listen.slice(0, at).replace(/^\[(.*)\]$/, "$1"), port: Number(listen.slice(at + 1)) };
}

// A wildcard bind is reached on loopback.
function healthzUrl(hostname: string, port: number): string {
  const host = hostname === "0.0.0.0" ? "127.0.0.1" : hostname === "::" ? "::1" : hostname;
  return `http://${host.includes(":") ? `[${host}]` : host}:${port}/healthz`;
}

type BindOutcome = { free: true } | { free: false; code: string };

function tryBind(hostname: string, port: number): BindOutcome {
  try {
    Bun.listen({ hostname, port, socket: { data() {} } }).stop(true);
    return { free: true };
  } catch (error) {
    return { free: false, code: String((error as { code?: unknown }).code ?? (error as Error).message) };
  }
}

/** Our /healthz shape (SPEC §3): anything else holding the port is another program. */
async function workerOnPort(url: string): Promise<{ version: string; trainer_mode: string } | null> {
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(HEALTHZ_TIMEOUT_MS) });
    const body = (await res.json()) as Record<string, unknown>;
    const ours = res.ok && body.status === "ok" && typeof body.version === "string" && typeof body.trainer_mode === "string" && "auth_mode" in body;
    return ours ? { version: body.version as string, trainer_mode: body.trainer_mode as string } : null;
  } catch {
    return null;
  }
}

export async function checkPort(config: Config): Promise<CheckResult> {
  const name = "port";
  const { hostname, port } = splitListen(config.listen);
  if (port === 0) return ok(name, `listen = "${config.listen}": the worker picks a free port`);
  const bind = tryBind(hostname, port);
  if (bind.free) return ok(name, `${config.listen} is free`);
  if (bind.code !== "EADDRINUSE") {
    return fail(name, `cannot bind ${config.listen}: ${bind.code}`, "check the listen address exists on this host; ports below 1024 need privileges the unit does not grant");
  }
  const url = healthzUrl(hostname, port);
  const worker = await workerOnPort(url);
  if (worker) return ok(name, `${config.listen} is held by this worker (lora-worker ${worker.version}, trainer mode ${worker.trainer_mode})`);
  return fail(name, `${config.listen} is held by another program (${url} is not lora-worker's)`, `find it with: ss -ltnp 'sport = :${port}'; stop it or change listen`);
}
