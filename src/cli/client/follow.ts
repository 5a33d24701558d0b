import { ClientError } from "./exit.ts";
import { barLine, jsonText, outcomeLines, progressLine, resumeHint } from "./format.ts";
import { eventsOf } from "./sse.ts";
import type { Terminal } from "./terminal.ts";
import type { JobView, WorkerClient } from "./worker-client.ts";

// Draws a job's events until its terminal event and answers the final view.
export async function followJob(client: WorkerClient, id: string, renderer: FollowRenderer): Promise<JobView> {
  for await (const event of eventsOf(client, id)) {
    if (event.kind === "heartbeat") continue;
    if (event.kind === "end") {
      renderer.finish(event.view);
      return event.view;
    }
    renderer.show(event.view);
  }
  throw new ClientError("unreachable", `the event stream of job ${id} ended without its final event`);
}

// How a followed job ended, and how to go on from its saved state when it can.
function endLines(view: JobView): string[] {
  const hint = resumeHint(view);
  return [...outcomeLines(view), ...(hint === null ? [] : [hint])];
}

// Draws a followed job: `show` on every event, `finish` once with the final view.
interface FollowRenderer {
  show(view: JobView): void;
  finish(view: JobView): void;
}

export function followRenderer(out: Terminal, json: boolean): FollowRenderer {
  if (json) return lines(out, jsonText, () => []);
  if (!out.isTTY) return lines(out, progressLine, endLines);
  return liveBar(out);
}

// One line per change: an event that would print the same line again prints nothing.
function lines(out: Terminal, line: (v: JobView) => string, outcome: (v: JobView) => string[]): FollowRenderer {
  let last = "";
  const show = (view: JobView) => {
    const next = line(view);
    if (next !== last) out.write(`${next}\n`);
    last = next;
  };
  return {
    show,
    finish(view) {
      show(view);
      for (const l of outcome(view)) out.write(`${l}\n`);
    },
  };
}

// Redrawn on each change, and when the window is resized: at the new width, over the rows the old one now takes.
function liveBar(out: Terminal): FollowRenderer {
  let last = "";
  let latest: JobView | null = null;
  const show = (view: JobView) => {
    latest = view;
    const next = barLine(view, out.columns);
    if (next !== last) out.redraw(next);
    last = next;
  };
  const stopWatching = out.onResize(() => {
    if (latest === null) return;
    last = "";
    show(latest);
  });
  return {
    show,
    finish(view) {
      stopWatching();
      show(view);
      out.write(`\n${endLines(view).map((l) => `${l}\n`).join("")}`);
    },
  };
}
