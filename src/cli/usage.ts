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
(${CONFIG}), the service account, the trainer's venv, torch, CUDA, bitsandbytes, sd-scripts, the
tokenizers, the handoff root, the model roots, the state dir, the trainer's TMPDIR, nvidia-smi, /dev/nvidia-uvm,
the port and the token file. It checks as --user/--group, else the unit's User=/Group= (--unit, default
/etc/systemd/system/lora-worker.service), else the user running it; run it as root or as that user. --dev-dir is
where the NVIDIA device nodes are (default /dev).

Exit codes: 0 no FAIL, 1 a FAIL, 2 usage error.
`,
  tokenizers: `Usage: lora-worker tokenizers import [--config FILE] PATH
       lora-worker tokenizers check [--config FILE]

import copies the two CLIP tokenizers sd-scripts loads offline into trainer.tokenizer_dir, from a Hugging Face
cache or from folders in --tokenizer_cache_dir's layout at PATH. check says whether trainer.tokenizer_dir holds
both, usable. The config is ${CONFIG}.

Exit codes: 0 imported or ready, 1 not imported or not usable, 2 usage error, 78 invalid configuration.
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
