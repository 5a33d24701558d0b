import { counted } from "../../counted.ts";
import type { JobView } from "./worker-client.ts";

type Likeness = NonNullable<JobView["likeness"]>;

// What each verdict means, in a few words (docs/likeness.md says what to do).
const MEANS: Record<NonNullable<Likeness["verdict"]>, string> = {
  learned: "the trigger's previews show the person, the class's do not",
  undertrained: "no preview of the trigger shows the person",
  overfit: "the class-only previews show the person at the end",
  not_scored: "not scored",
};

const distance = (d: number | null, faces: number) =>
  d === null ? "no face" : `${d.toFixed(2)} (${counted(faces, "face")})`;

/** A verdict as the CLI says it: what it means, or why there is none. */
export function verdictText(verdict: NonNullable<Likeness["verdict"]>, reason: Likeness["reason"]): string {
  return `${verdict}: ${reason === null ? MEANS[verdict] : reason.replaceAll("_", " ")}`;
}

// The likeness report: one row per scored point (trigger and class distances against the threshold), then the
// verdict with the best step and its LoRA. An older worker sends none; a run without previews has nothing to say.
export function likenessRows(view: JobView, baseUrl: string): [string, string][] {
  const report = view.likeness;
  if (report === undefined || report.reason === "no_previews") return [];
  const rows = report.points.map((p, i): [string, string] => [
    i === 0 ? "likeness" : "",
    `step ${p.step}: trigger ${distance(p.trigger.distance, p.trigger.faces)}, ` +
      `class ${distance(p.class.distance, p.class.faces)} (a match is at most ${report.threshold})`,
  ]);
  if (report.verdict === null) return rows;
  rows.push(["verdict", verdictText(report.verdict, report.reason)]);
  if (report.best_step !== null) {
    const url = report.best_url === null ? "not kept" : `${baseUrl}${report.best_url} (sha256 ${report.best_sha256})`;
    rows.push(["best", `step ${report.best_step}: ${url}`]);
  }
  return rows;
}
