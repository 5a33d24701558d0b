import { loss, shownStatus, steps } from "./format.ts";
import { SHORT_ID } from "./job-id.ts";
import { fitTable, type Layout } from "./table.ts";
import type { JobView } from "./worker-client.ts";

// `jobs`: a header row, then one line a job. Whole (into a pipe, or on a wide terminal): id, status, steps,
// loss, tier@device, created, output name, error_code. Narrower, in this order: the date loses its year,
// seconds and zone, then tier@device, loss and the date go, the output name is cut, then the id is shortened to
// its first SHORT_ID characters (which every command that takes an ID accepts); only then does the name go.
// Status, steps and the error code stay. The header is a row like the others, so it loses the same columns.

interface JobCells {
  id: string;
  shortId: string;
  status: string;
  steps: string;
  loss: string;
  tier: string;
  created: string;
  shortCreated: string;
  name: string;
  error?: string;
}

function cellsOf(view: JobView): JobCells {
  const r = view.request;
  return {
    id: view.worker_job_id,
    shortId: view.worker_job_id.slice(0, SHORT_ID),
    status: shownStatus(view),
    steps: steps(view),
    loss: loss(view),
    tier: `${String(r.tier)}@${String(r.device_index)}`,
    created: view.created_at,
    // "2026-11-30T06:38:12.345Z" as "11-30 06:38".
    shortCreated: view.created_at.slice(5, 16).replace("T", " "),
    name: String(r.output_name),
    ...(view.error_code ? { error: view.error_code } : {}),
  };
}

function headerOf(rows: readonly JobCells[]): JobCells {
  return {
    id: "ID", shortId: "ID", status: "STATUS", steps: "STEPS", loss: "LOSS", tier: "TIER@DEVICE",
    created: "CREATED", shortCreated: "CREATED", name: "OUTPUT",
    ...(rows.some((r) => r.error) ? { error: "ERROR" } : {}),
  };
}

const nameTail = (c: JobCells) => ({ text: c.name, suffix: c.error });

const LAYOUTS: Layout<JobCells>[] = [
  (c) => ({ cells: [c.id, c.status, c.steps, c.loss, c.tier, c.created], tail: nameTail(c) }),
  (c) => ({ cells: [c.id, c.status, c.steps, c.loss, c.tier, c.shortCreated], tail: nameTail(c) }),
  (c) => ({ cells: [c.id, c.status, c.steps, c.loss, c.shortCreated], tail: nameTail(c) }),
  (c) => ({ cells: [c.id, c.status, c.steps, c.shortCreated], tail: nameTail(c) }),
  (c) => ({ cells: [c.id, c.status, c.steps], tail: nameTail(c) }),
  (c) => ({ cells: [c.shortId, c.status, c.steps], tail: nameTail(c) }),
  (c) => ({ cells: [c.shortId, c.status, c.steps], tail: { ...nameTail(c), droppable: true } }),
];

export function jobTable(views: readonly JobView[], columns: number): string[] {
  const rows = views.map(cellsOf);
  const table = [headerOf(rows), ...rows];
  // Steps read as numbers: right-aligned, so that their slashes line up.
  const stepsWidth = Math.max(...table.map((r) => r.steps.length));
  return fitTable(table.map((r) => ({ ...r, steps: r.steps.padStart(stepsWidth) })), LAYOUTS, columns);
}
