// What `lora-worker COMMAND --help` prints for the commands that run on the host (the client commands print
// their own, with the address options): the usage line, what it does, how it ends.

const CONFIG = "FILE, else $LORA_WORKER_CONFIG, else /etc/lora-worker/config.toml";

/** Each host command's help, by the word that names it. */
export const COMMAND_USAGE: Readonly<Record<string, string>> = {
  serve: `Usage: lora-worker serve [--config FILE]

Runs the HTTP worker with the config ${CONFIG}: the API on \`listen\`, the trainings it
starts and follows, retention. SIGTERM or SIGINT stops it; running trainings go on and the next start re-adopts
them.

Exit codes: 0 stopped, 2 usage error, 73 state dir in use or damaged, 78 invalid configuration.
`,
  plan: `Usage: lora-worker plan [--config FILE] REQUEST.json

Checks REQUEST.json (a POST /train body) as the worker would, with the config ${CONFIG}, and
prints the exact process it would start (argv, environment, working directory, dataset TOML) as JSON; or, refused,
the answer the worker would give. Spawns nothing, writes nothing.

Exit codes: 0 planned, 1 request refused, 2 usage error, 78 invalid configuration.
`,
  doctor: `Usage: lora-worker doctor [--config FILE] [--user NAME] [--group NAME] [--unit FILE] [--dev-dir DIR]

Checks this host as an operator would, one OK/WARN/FAIL line per check with the fix, then a count: the config
(${CONFIG}), the service account, the trainer's venv, torch, CUDA, bitsandbytes, sd-scripts and its
parser on every launch the worker would make, the packages against the lock (these as \`trainer check\`), the
tokenizers, the handoff root, the model roots, the state dir, the trainer's TMPDIR, nvidia-smi, /dev/nvidia-uvm,
the port and the token file. It checks as --user/--group, else the unit's User=/Group= (--unit, default
/etc/systemd/system/lora-worker.service), else the user running it; run it as root or as that user. --dev-dir is
where the NVIDIA device nodes are (default /dev).

Exit codes: 0 no FAIL, 1 a FAIL, 2 usage error.
`,
  tokenizers: `Usage: lora-worker tokenizers write [--config FILE]
       lora-worker tokenizers import [--config FILE] PATH
       lora-worker tokenizers check [--config FILE]

write puts the two CLIP tokenizers sd-scripts loads offline into trainer.tokenizer_dir from what this program
carries (CLIP's merges, the vocabulary built from them), with no download; a folder already ready is left as it
is, one that is not is replaced. import copies them from a Hugging Face cache or from folders in
--tokenizer_cache_dir's layout at PATH. Both check every file first and put both in place or neither. check says
whether trainer.tokenizer_dir holds both, usable. The config is ${CONFIG}; only trainer.tokenizer_dir
and state_dir are read from it, so these run before \`trainer install\`.

Exit codes: 0 written, imported or ready, 1 not written, not imported or not usable, 2 usage error, 78 invalid
configuration.
`,
  trainer: `Usage: lora-worker trainer bundle --sd-scripts DIR --out FILE [--other-sd-scripts] [--python PY]
                                [--python-version X.Y] [--platform TAG]
       lora-worker trainer install FILE [--venv DIR] [--python PY]
       lora-worker trainer check [--config FILE] [--user NAME] [--group NAME] [--unit FILE]

bundle, on a machine that reaches PyPI: one tar archive FILE holding the sd-scripts tree at DIR (it must be
commit 48d368f, told by its files' content, unless --other-sd-scripts takes another and says so), the worker's
Python lock, every wheel the lock names for CPython --python-version on --platform (default: those of --python,
python3), fetched by that Python's pip, and a manifest of all of it. It prints what it holds and its size.

install, offline: a new venv at --venv DIR (default /opt/lora-worker/trainer/<commit>-<bundle digest>) made by
--python (python3) from FILE only (pip --no-index, each wheel's hash checked), with sd-scripts in DIR/sd-scripts.
It is built under a temporary name and renamed whole; an existing folder is never changed (the same bundle's is
left as it is, and said so). It prints the trainer.accelerate and trainer.sd_scripts_dir lines for the config.

check: doctor's checks of the trainer environment the config (${CONFIG}) names: accelerate, torch
and the GPUs nvidia-smi lists, bitsandbytes' AdamW8bit, sd-scripts' own parser and dataset schema on every
launch the worker would make (every tier, with samples and without, fresh and resumed), the packages against
the lock. As doctor, as --user/--group, else the unit's account, else the user running it.

Exit codes: 0 bundled, installed or no FAIL; 1 not bundled, not installed or a FAIL; 2 usage error.
`,
  config: `Usage: lora-worker config template

Prints every config key, commented out at its default, under its meaning: a new host's config.toml.

Exit codes: 0 printed, 2 usage error.
`,
  openapi: `Usage: lora-worker openapi

Prints the OpenAPI 3.1 document this worker serves at GET /openapi.json, as JSON on stdout: no server, no config,
no token. Generate a client from it in CI: lora-worker openapi > openapi.json.

Exit codes: 0 printed, 2 usage error.
`,
  launch: `Usage: lora-worker launch [accelerate launch's options] SCRIPT [SCRIPT's options]

The simulated trainer: what trainer.mode = "simulate" runs in place of \`accelerate launch\`. It takes the argv
the worker builds and prints sd-scripts' output for it, as the simulate.* keys say. Not for use by hand.
`,
  shim: `Usage: lora-worker shim JOB_DIR

Internal: the per-job process the worker starts. It starts the trainer that JOB_DIR/launch.json names, outlives
restarts of the worker and records how the trainer ended in JOB_DIR/exit.json. Not for use by hand.
`,
};

/** A help's usage on one line: `tokenizers import … PATH | tokenizers check …` for a command of two forms. */
export function usageLine(help: string): string {
  const lines = help.slice(0, help.indexOf("\n\n")).split("\n");
  return lines.map((line) => line.replace(/^(Usage:)?\s*lora-worker /, "lora-worker ")).join(" | ");
}

/** Whether a command's words ask for its help. */
export const asksForHelp = (words: readonly string[]) => words.includes("--help") || words.includes("-h");
