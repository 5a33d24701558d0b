import { loss, steps } from "./format.ts";
import { fitTable, type Layout } from "./table.ts";
import type { JobView } from "./worker-client.ts";

// `jobs`: one line a job. Whole (into a pipe, or on a wide terminal): id, status, steps, loss, tier@device,
// created, output name, error_code. Narrower, in this order: the date loses its year, seconds and zone,
// then tier@device, loss and the date go; the output name is cut, then dropped; the id (what the other
// commands take), status and steps stay.

interface Cells {
  id: string;
  status: string;
  steps: string;
  loss: string;
  tier: string;
  created: string;
  name: string;
  error?: string;
}

function cellsOf(view: JobView): Cells {
  const r = view.request;
  return {
    id: view.worker_job_id,
    status: view.status.padEnd(9),
    steps: steps(view).padStart(9),
    loss: `loss ${loss(view)}`,
    tier: `${String(r.tier)}@${String(r.device_index)}`.padEnd(10),
    created: view.created_at,
    name: String(r.output_name),
    ...(view.error_code ? { error: view.error_code } : {}),
  };
}

// "2026-11-30T06:38:12.345Z" as "11-30 06:38".
const shortDate = (iso: string) => iso.slice(5, 16).replace("T", " ");

const tail = (c: Cells) => ({ text: c.name, suffix: c.error });

const LAYOUTS: Layout<Cells>[] = [
  (c) => ({ cells: [c.id, c.status, c.steps, c.loss, c.tier, c.created], tail: tail(c) }),
  (c) => ({ cells: [c.id, c.status, c.steps, c.loss, c.tier, shortDate(c.created)], tail: tail(c) }),
  (c) => ({ cells: [c.id, c.status, c.steps, c.loss, shortDate(c.created)], tail: tail(c) }),
  (c) => ({ cells: [c.id, c.status, c.steps, shortDate(c.created)], tail: tail(c) }),
  (c) => ({ cells: [c.id, c.status, c.steps], tail: tail(c) }),
  (c) => ({ cells: [c.id, c.status, c.steps] }),
];

export function jobTable(views: readonly JobView[], columns: number): string[] {
  return fitTable(views.map(cellsOf), LAYOUTS, columns);
}
