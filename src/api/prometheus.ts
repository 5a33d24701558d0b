// Prometheus text exposition (format 0.0.4): "# HELP", "# TYPE", then `name{label="value"} number` lines.
// Label values escape backslash, double quote and newline; HELP text escapes backslash and newline.
type Labels = Record<string, string | number>;
type Kind = "gauge" | "counter" | "histogram";

export interface Family {
  name: string;
  help: string;
  kind: Kind;
  samples: Array<{ suffix?: string; labels?: Labels; value: number }>;
}

const escapeLabel = (v: string) => v.replaceAll("\\", "\\\\").replaceAll('"', '\\"').replaceAll("\n", "\\n");
const escapeHelp = (v: string) => v.replaceAll("\\", "\\\\").replaceAll("\n", "\\n");

function formatValue(v: number): string {
  if (Number.isNaN(v)) return "NaN";
  if (v === Infinity) return "+Inf";
  if (v === -Infinity) return "-Inf";
  return String(v);
}

function formatLabels(labels: Labels | undefined): string {
  const entries = Object.entries(labels ?? {});
  return entries.length === 0 ? "" : `{${entries.map(([k, v]) => `${k}="${escapeLabel(String(v))}"`).join(",")}}`;
}

export function render(families: Family[]): string {
  return families
    .map((f) => {
      const head = `# HELP ${f.name} ${escapeHelp(f.help)}\n# TYPE ${f.name} ${f.kind}\n`;
      const lines = f.samples.map((s) => {
        return `${f.name}${s.suffix ?? ""}${formatLabels(s.labels)} ${formatValue(s.value)}\n`;
      });
      return head + lines.join("");
    })
    .join("");
}
