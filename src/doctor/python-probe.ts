// The question doctor asks the trainer's interpreter, and what its answer says. The program does, in
// a run's order, what a run needs of the venv: import torch, ask it for CUDA devices, import
// bitsandbytes (AdamW8bit imports it only once the model is loaded and the latents are cached). It
// reports each stage on stdout as it passes it, so a crash or a hang shows the stage it stopped in.
import { z } from "zod";
import type { RunResult } from "./service-account.ts";

export const STAGES = ["torch", "cuda", "bitsandbytes"] as const;
export type Stage = (typeof STAGES)[number];

export const REPORT_MARK = "lora-worker-doctor ";

export const PROBE_PROGRAM = `import json
def report(stage, **facts):
    print(${JSON.stringify(REPORT_MARK)} + json.dumps(dict(stage=stage, **facts)), flush=True)
import torch
report("torch", version=torch.__version__)
available = torch.cuda.is_available()
names = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())] if available else []
report("cuda", available=available, cuda=torch.version.cuda, devices=names)
import bitsandbytes
report("bitsandbytes", version=getattr(bitsandbytes, "__version__", "unknown"))
`;

const Report = z.discriminatedUnion("stage", [
  z.object({ stage: z.literal("torch"), version: z.string() }),
  z.object({ stage: z.literal("cuda"), available: z.boolean(), cuda: z.string().nullable(), devices: z.array(z.string()) }),
  z.object({ stage: z.literal("bitsandbytes"), version: z.string() }),
]);
export type Report = z.infer<typeof Report>;
export type Reports = { [S in Stage]?: Extract<Report, { stage: S }> };

// Python's last word on an uncaught exception: `ImportError: …`, `torch.OutOfMemoryError: …`.
const EXCEPTION_LINE = /^[A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt)\b:?/;
// Enough of a message to name the problem on one line.
const MAX_WHY_CHARS = 240;

export function readReports(stdout: string): Reports {
  const reports: Reports = {};
  for (const line of stdout.split("\n")) {
    if (!line.startsWith(REPORT_MARK)) continue;
    const parsed = Report.safeParse(parseJson(line.slice(REPORT_MARK.length)));
    if (parsed.success) Object.assign(reports, { [parsed.data.stage]: parsed.data });
  }
  return reports;
}

// Why the program stopped short: the exception it died of (with a message that runs over several
// lines joined into one), else its last line of output.
export function stopReason(run: RunResult): string {
  const lines = run.stderr.split("\n");
  const at = lines.findLastIndex((line) => EXCEPTION_LINE.test(line));
  const why = at === -1 ? lastLine(run.output) : lines.slice(at).map((line) => line.trim()).filter((line) => line !== "").join(" ");
  return why.length > MAX_WHY_CHARS ? `${why.slice(0, MAX_WHY_CHARS - 1)}…` : why;
}

function lastLine(output: string): string {
  return output.split("\n").filter((line) => line.trim() !== "" && !line.startsWith(REPORT_MARK)).at(-1) ?? "no output";
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
}
