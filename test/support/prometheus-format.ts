// A checker for the Prometheus text format 0.0.4, written from the format's rules, to judge /metrics.
const NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/;
const VALUE = /^(?:[+-]?(?:\d+\.?\d*(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?)|NaN|[+-]Inf)$/;

export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

export function parseExposition(text: string): { samples: Sample[]; types: Map<string, string>; errors: string[] } {
  const errors: string[] = [];
  const types = new Map<string, string>();
  const samples: Sample[] = [];
  const seen = new Set<string>();
  if (text !== "" && !text.endsWith("\n")) errors.push("the exposition must end with a newline");
  text.split("\n").forEach((line, i) => {
    const at = `line ${i + 1}`;
    if (line === "" || (line.startsWith("#") && !/^# (HELP|TYPE) /.test(line))) return;
    const meta = /^# (HELP|TYPE) (\S+)(?: (.*))?$/.exec(line);
    if (meta) {
      if (!NAME.test(meta[2]!)) errors.push(`${at}: bad metric name ${meta[2]}`);
      if (meta[1] === "TYPE") {
        if (!["counter", "gauge", "histogram", "summary", "untyped"].includes(meta[3] ?? "")) errors.push(`${at}: bad type ${meta[3]}`);
        if (types.has(meta[2]!)) errors.push(`${at}: second TYPE for ${meta[2]}`);
        if (samples.some((s) => familyOf(s.name, types) === meta[2])) errors.push(`${at}: TYPE for ${meta[2]} after its samples`);
        types.set(meta[2]!, meta[3]!);
      }
      return;
    }
    const sample = parseSample(line);
    if (typeof sample === "string") return void errors.push(`${at}: ${sample}`);
    const key = `${sample.name}${JSON.stringify(Object.entries(sample.labels).sort())}`;
    if (seen.has(key)) errors.push(`${at}: duplicate series ${key}`);
    seen.add(key);
    if (!types.has(familyOf(sample.name, types))) errors.push(`${at}: ${sample.name} has no TYPE before it`);
    samples.push(sample);
  });
  errors.push(...histogramErrors(samples, types));
  return { samples, types, errors };
}

function familyOf(name: string, types: Map<string, string>): string {
  const base = name.replace(/_(bucket|sum|count)$/, "");
  return types.get(base) === "histogram" ? base : name;
}

function parseSample(line: string): Sample | string {
  const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$/.exec(line);
  if (!m) return `not a sample line: ${line}`;
  if (!VALUE.test(m[4]!)) return `bad value ${m[4]}`;
  const labels: Record<string, string> = {};
  const body = m[3] ?? "";
  const re = /([^=,]+)="((?:[^"\\]|\\[\\"n])*)"(,|$)/gy;
  let consumed = 0;
  for (let lm = re.exec(body); lm; lm = re.exec(body)) {
    if (!LABEL_NAME.test(lm[1]!)) return `bad label name ${lm[1]}`;
    labels[lm[1]!] = lm[2]!.replace(/\\(.)/g, (_, c: string) => (c === "n" ? "\n" : c));
    consumed = re.lastIndex;
  }
  if (consumed !== body.length) return `bad label set {${body}}`;
  const v = m[4]!;
  return { name: m[1]!, labels, value: v === "+Inf" ? Infinity : v === "-Inf" ? -Infinity : Number(v) };
}

// Buckets cumulative and ordered by le, ending at +Inf which equals _count.
function histogramErrors(samples: Sample[], types: Map<string, string>): string[] {
  const errors: string[] = [];
  for (const [name, type] of types) {
    if (type !== "histogram") continue;
    const groups = new Map<string, Sample[]>();
    for (const s of samples.filter((x) => x.name === `${name}_bucket`)) {
      const { le: _, ...rest } = s.labels;
      const key = JSON.stringify(Object.entries(rest).sort());
      groups.set(key, [...(groups.get(key) ?? []), s]);
    }
    for (const [key, buckets] of groups) {
      const les = buckets.map((b) => (b.labels.le === "+Inf" ? Infinity : Number(b.labels.le)));
      if (les.at(-1) !== Infinity) errors.push(`${name}${key}: no +Inf bucket`);
      if (les.some((le, i) => i > 0 && le <= les[i - 1]!)) errors.push(`${name}${key}: le not increasing`);
      if (buckets.some((b, i) => i > 0 && b.value < buckets[i - 1]!.value)) errors.push(`${name}${key}: buckets not cumulative`);
      const count = samples.find((s) => s.name === `${name}_count` && JSON.stringify(Object.entries(s.labels).sort()) === key);
      if (!count || count.value !== buckets.at(-1)!.value) errors.push(`${name}${key}: _count differs from the +Inf bucket`);
    }
  }
  return errors;
}
