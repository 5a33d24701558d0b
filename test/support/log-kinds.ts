// The kinds of line in an sd-scripts log that the worker reads, or that tell a person where a run is, and each line
// reduced to its shape: paths, numbers, bar cells and tqdm's times taken out, so a run on a GPU, one on a CPU and
// the simulator's can be laid side by side. Lines of no kind here (dataset listings, warnings) are left out.
const KINDS: Array<[string, RegExp]> = [
  ["steps bar", /^steps:/],
  ["caching", /^(?:caching (?:latents|Text Encoder outputs)\b|checking cache validity)/],
  ["dataset", /^\[Dataset \d+\]$/],
  ["running training", /^running training/],
  ["total steps", /total optimization steps/],
  ["epoch", /^epoch \d+\/\d+$/],
  ["epoch incremented", /^epoch is incremented\./],
  ["sampling", /^generating sample images at step/],
  ["sample setting", /^(?:prompt|negative_prompt|height|width|sample_steps|scale|sample_sampler|seed): /],
  ["checkpoint", /^saving checkpoint: /],
  ["removing", /^removing old (?:state|checkpoint): /],
  ["state", /^saving state at step \d+$|^saving last state\.$/],
  ["accelerate save", new RegExp([
    /^Saving current state to |^save train state to /.source,
    /^(?:Model weights|Optimizer state|Scheduler state|Random states|Sampler state for dataloader \d) saved in /.source,
  ].join("|"))],
  ["resume", new RegExp([
    /^resume training from local state: |^Loading states from |^load train state from /.source,
    /^All [a-z ]+ loaded successfully$|^Loading in \d+ custom states$|^skipping \d+ steps/.source,
  ].join("|"))],
  ["model saved", /^model saved\.$/],
];
const BAR = /^\s*\d+%\|/;
const UP = "\x1b[A";
// What is left of a line when what differs from run to run is taken out: paths, the bar's cells (tqdm draws partial
// ones on a terminal's width), the rate in whichever unit tqdm chose, and every number.
function template(line: string): string {
  return line
    .replace(/\?it\/s|\d+(?:\.\d+)?(?:s\/it|it\/s)/g, "<rate>")
    .replace(/(?<=^|[\s'"])\/[^\s'":,\]]+/g, "<path>")
    .replace(/\|[█▏▎▍▌▋▊▉ ]*\|/, "|<cells>|")
    .replace("<?,", "<N,")
    .replace(/\d+(?:\.\d+)?/g, "N")
    .replace(/\s+/g, " ")
    .trim();
}

export type Classified = Array<[kind: string, shape: string]>;

// Each line of the log (a tqdm redraw is a line) of a kind, with its shape. A bar is a kind by where it stands: the
// sampler's is nested under the steps bar (it ends with ESC[A), a caching bar follows a caching line.
export function classify(log: string): Classified {
  const out: Classified = [];
  let lastText = "";
  for (const raw of log.split(/\r|\n/)) {
    const line = raw.trimEnd();
    if (line.trim() === "") continue;
    if (BAR.test(line)) {
      // A warning may be glued after a nested bar's ESC[A: the bar is what comes before it.
      const nested = line.indexOf(UP);
      const kind = nested !== -1 ? "sampler bar" : /^caching /.test(lastText) ? "caching bar" : null;
      if (kind) out.push([kind, template(nested === -1 ? line : line.slice(0, nested + UP.length))]);
      continue;
    }
    if (!line.startsWith("steps:")) lastText = line;
    const kind = KINDS.find(([, re]) => re.test(line));
    if (kind) out.push([kind[0], template(line)]);
  }
  return out;
}

/** The kinds in the order the run went through them, a run of one kind counted once. */
export function kindSequence(lines: Classified): string[] {
  return lines.map(([kind]) => kind).filter((kind, i, all) => i === 0 || all[i - 1] !== kind);
}

/** Per kind, every shape its lines took. */
export function shapesByKind(lines: Classified): Record<string, string[]> {
  const shapes: Record<string, Set<string>> = {};
  for (const [kind, shape] of lines) (shapes[kind] ??= new Set()).add(shape);
  return Object.fromEntries(Object.entries(shapes).map(([kind, set]) => [kind, [...set].sort()]));
}
