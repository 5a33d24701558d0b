import { Hono } from "hono";
import type { LoadedConfig } from "../config/load.ts";
import type { Dispatcher } from "../dispatch/dispatch.ts";
import type { Supervisor } from "../supervisor/index.ts";
import { dispatchSmoke } from "../dispatch/smoke.ts";
import { refusalError } from "./errors.ts";
import { readJsonBody } from "./body.ts";

interface SmokeRouteDeps {
  loaded: LoadedConfig;
  dispatcher: Dispatcher;
  supervisor: Supervisor;
  bodyDeadlineMs?: number;
}

// POST /smoke: the operator's proof that this deployment trains (`lora-worker smoke` drives the rest). The run is
// paused from its start (the pause is on record before its launch), so it stops at the first saved state the
// worker reads: a resume takes it on.
export function smokeRoutes({ loaded, dispatcher, supervisor, bodyDeadlineMs }: SmokeRouteDeps) {
  return new Hono().post("/", async (c) => {
    const { value, faults } = await readJsonBody(c.req.raw, bodyDeadlineMs);
    const result = await dispatchSmoke(value, loaded.config, dispatcher, faults);
    if (!result.ok) throw refusalError(result.error);
    void supervisor.pause(result.value.id);
    return c.json({ worker_job_id: result.value.id, status: result.value.status });
  });
}
