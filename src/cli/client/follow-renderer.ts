import { barLine, outcomeLines, progressLine } from "./job-format.ts";
import { jsonText } from "./json-text.ts";
import type { Terminal } from "./terminal.ts";
import type { JobView } from "./wire.ts";

/** Draws a followed job: `show` on every event, `finish` once with the final view. */
export interface FollowRenderer {
  show(view: JobView): void;
  finish(view: JobView): void;
}

export function followRenderer(out: Terminal, json: boolean): FollowRenderer {
  if (json) return lines(out, jsonText, () => []);
  if (!out.isTTY) return lines(out, progressLine, outcomeLines);
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

function liveBar(out: Terminal): FollowRenderer {
  let last = "";
  const show = (view: JobView) => {
    const next = barLine(view, out.columns);
    if (next !== last) out.redraw(next);
    last = next;
  };
  return {
    show,
    finish(view) {
      show(view);
      out.write(`\n${outcomeLines(view).map((l) => `${l}\n`).join("")}`);
    },
  };
}
