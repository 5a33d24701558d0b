import { REPORT_MARK, type Report } from "../../src/doctor/trainer-checks.ts";
import { PYTHON_LOCK } from "../../src/trainer/lock.ts";
import { writeExecutable } from "./scratch-files.ts";

// What a venv with a CUDA torch on the reference host's two cards and a working bitsandbytes reports.
export const TORCH_REPORT: Report = { stage: "torch", version: "2.5.1+cu124" };
export const CUDA_REPORT = { stage: "cuda", available: true, cuda: "12.4", devices: ["NVIDIA GeForce RTX 3090", "NVIDIA RTX A6000"] } satisfies Report;
export const BITSANDBYTES_REPORT: Report = { stage: "bitsandbytes", version: "0.45.0", optimizer: "AdamW8bit stepped on cuda:0" };
export const HEALTHY: Report[] = [TORCH_REPORT, CUDA_REPORT, BITSANDBYTES_REPORT];

const reportLines = (reports: Report[]) => reports.map((report) => `${REPORT_MARK}${JSON.stringify(report)}`).join("\n");

/** The ids CLIP's tokenizer gives the caption doctor's probe tokenizes. */
export const CLIP_CAPTION_IDS = [49406, 320, 1125, 539, 47993, 2533, 49407];

// Doctor's tokenizer probe is `python -c PROGRAM '[["FOLDER", pads_with_zero], ...]'`: each folder it names is
// answered as loaded, a caption becoming `ids` ids and the known one `caption` (null: no answer, as when
// transformers cannot load them).
function tokenizerAnswers(ids: number | null, caption: number[]): string {
  if (ids === null) return "";
  const report = `${REPORT_MARK}{"stage": "tokenizer", "folder": "%s", "ids": ${ids}, "caption": ${JSON.stringify(caption)}}\\n`;
  return `[ -n "$3" ] && printf '%s' "$3" | grep -o '"[^"]*"' | tr -d '"' | while read -r f; do printf '${report}' "$f"; done\n`;
}

// Doctor's sockets probe needs nothing of the venv: the system's python3 binds them for real. Its sd-scripts probe
// runs in the system's python3 too, against the sd-scripts tree the config names (a stand-in in tests,
// stand-in-sd-scripts.ts), and its package listing is answered as the lock.
const LOCK_PACKAGES = `${REPORT_MARK}${JSON.stringify(Object.fromEntries(PYTHON_LOCK.map((pin) => [pin.name, pin.version])))}`;
const SOCKETS_BY_PYTHON3 = 'case "$2" in *DupFd*|*setup_parser*) exec python3 "$@";; ' +
  `*importlib.metadata*) printf '%s\\n' '${LOCK_PACKAGES}'; exit 0;; esac\n`;

/** A stand-in for the venv's python: answers doctor's probes with `reports` (and each tokenizer folder asked about
 * with `tokenizerIds`), prints `stderr`, exits with `exit`; the sockets probe (tmpdir-check.ts) runs the system's. */
export function writeFakePython(
  path: string,
  { reports = HEALTHY, stderr = "", exit = 0, tokenizerIds = 77, captionIds = CLIP_CAPTION_IDS }:
    { reports?: Report[]; stderr?: string; exit?: number; tokenizerIds?: number | null; captionIds?: number[] } = {},
): string {
  const quotedStderr = stderr.replaceAll("'", `'"'"'`);
  return writeExecutable(path, `#!/bin/sh\n${SOCKETS_BY_PYTHON3}cat <<'REPORTS'\n${reportLines(reports)}\nREPORTS\n${tokenizerAnswers(tokenizerIds, captionIds)}printf '%s' '${quotedStderr}' >&2\nexit ${exit}\n`);
}

/** A python that reports `reports`, then hangs in a child that holds its output open; it writes its pid to `pidFile`. */
export function writeHangingPython(path: string, pidFile: string, reports: Report[]): string {
  return writeExecutable(path, `#!/bin/sh\necho $$ > '${pidFile}'\ncat <<'REPORTS'\n${reportLines(reports)}\nREPORTS\nsleep 600 &\nwait\n`);
}
