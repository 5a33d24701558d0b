import { REPORT_MARK, type Report } from "../../src/doctor/trainer-checks.ts";
import { writeExecutable } from "./scratch-files.ts";

// What a venv with a CUDA torch on the reference host's two cards and a working bitsandbytes reports.
export const TORCH_REPORT: Report = { stage: "torch", version: "2.5.1+cu124" };
export const CUDA_REPORT = { stage: "cuda", available: true, cuda: "12.4", devices: ["NVIDIA GeForce RTX 3090", "NVIDIA RTX A6000"] } satisfies Report;
export const BITSANDBYTES_REPORT: Report = { stage: "bitsandbytes", version: "0.45.0" };
export const HEALTHY: Report[] = [TORCH_REPORT, CUDA_REPORT, BITSANDBYTES_REPORT];

const reportLines = (reports: Report[]) => reports.map((report) => `${REPORT_MARK}${JSON.stringify(report)}`).join("\n");

/** A stand-in for the venv's python: answers doctor's probe with `reports`, prints `stderr`, exits with `exit`. */
export function writeFakePython(path: string, { reports = HEALTHY, stderr = "", exit = 0 }: { reports?: Report[]; stderr?: string; exit?: number } = {}): string {
  return writeExecutable(path, `#!/bin/sh\ncat <<'REPORTS'\n${reportLines(reports)}\nREPORTS\nprintf '%s' '${stderr.replaceAll("'", `'"'"'`)}' >&2\nexit ${exit}\n`);
}

/** A python that reports `reports`, then hangs in a child that holds its output open; it writes its pid to `pidFile`. */
export function writeHangingPython(path: string, pidFile: string, reports: Report[]): string {
  return writeExecutable(path, `#!/bin/sh\necho $$ > '${pidFile}'\ncat <<'REPORTS'\n${reportLines(reports)}\nREPORTS\nsleep 600 &\nwait\n`);
}
