import { Hono } from "hono";
import type { Dispatcher } from "../dispatch/dispatch.ts";
import { readJsonBody } from "./body.ts";
import { datasetReportView } from "./dataset-view.ts";
import { refusalError } from "./errors.ts";

interface DatasetRouteDeps {
  dispatcher: Dispatcher;
  bodyDeadlineMs?: number;
}

// POST /dataset/check: the body of POST /train, answered with the dataset report its job would get (token window,
// per-file notes, identity), so the Studio can show it as the user uploads; nothing is trained or kept.
export function datasetRoutes({ dispatcher, bodyDeadlineMs }: DatasetRouteDeps) {
  return new Hono().post("/check", async (c) => {
    const { value, faults } = await readJsonBody(c.req.raw, bodyDeadlineMs);
    const result = await dispatcher.checkDataset(value, faults);
    if (!result.ok) throw refusalError(result.error);
    return c.json({ prepared: datasetReportView(result.value) });
  });
}
