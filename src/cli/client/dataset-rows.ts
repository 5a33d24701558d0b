import { LONGEST_WINDOW, ONE_WINDOW } from "../../job.ts";
import { counted } from "../../counted.ts";
import { identityRows } from "./identity-rows.ts";
import type { JobView } from "./worker-client.ts";

type Report = NonNullable<NonNullable<JobView["dataset"]>["prepared"]>;

// What the worker did to the job's dataset copy, and what sd-scripts would have done to it unsaid. An older worker
// sends no report, or one without the context, the notes and the warnings.
export function datasetRows(view: JobView): [string, string][] {
  const report = view.dataset?.prepared;
  if (report === undefined) return [];
  const c = report.captions;
  const moved = c.trigger_moved ? `, moved in front in ${c.trigger_moved}` : "";
  const rows: [string, string][] = [[
    "captions",
    `trigger added to ${counted(c.trigger_added, "caption")}, already in ${c.trigger_present}${moved}, ` +
      `${counted(c.images_without_caption, "image")} without one`,
  ]];
  if (report.token_window !== undefined) rows.push(["context", contextLine(report.token_window)]);
  for (const warning of report.warnings ?? []) rows.push(["warning", warning]);
  if (report.turned_upright.length > 0) rows.push(["upright", `turned: ${report.turned_upright.join(", ")}`]);
  if (report.small.length > 0) {
    const scaled = (s: Report["small"][number]) => ("scale" in s ? `, scaled ${round(s.scale)}x` : "");
    rows.push(["small", report.small.map((s) => `${s.image} (${s.width}x${s.height}${scaled(s)})`).join(", ")]);
  }
  const large = (report.large ?? []).map((s) => `${s.image} (${s.width}x${s.height})`);
  if (large.length > 0) rows.push(["large", `${large.join(", ")}: over Pillow's 89,478,485 pixels, it warns`]);
  for (const set of report.duplicates) rows.push(["same", set.join(" = ")]);
  for (const cut of c.cut) {
    rows.push(["cut", `${cut.caption}: ${tokenCount(cut.tokens)}, more than the text encoders read`]);
  }
  (report.files ?? []).forEach((note, i) => rows.push([i === 0 ? "files" : "", `${note.file}: ${note.text}`]));
  if (report.files_not_listed) rows.push(["", `and ${report.files_not_listed} more`]);
  return [...rows, ...identityRows(report.identity)];
}

function contextLine(window: NonNullable<Report["token_window"]>): string {
  const flag = window.tokens === ONE_WINDOW ? "no --max_token_length" : `--max_token_length=${window.tokens}`;
  const { longest } = window;
  const why = longest === null ? "no captions" : `the longest caption, ${longest.caption}, has ` +
    count(longest.tokens);
  return `${window.tokens} tokens (${flag}): ${why}`;
}

// Counting stops past the longest context (dataset/clip-tokens.ts): a longer caption is not counted further.
const count = (n: number) => (n > LONGEST_WINDOW ? `more than ${LONGEST_WINDOW}` : String(n));
const tokenCount = (n: number) => `${count(n)} tokens`;

const round = (scale: number) => String(Math.round(scale * 100) / 100);
