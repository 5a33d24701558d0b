// Every command, once: the word that names it, its usage and summary for the overview, its help, and how it runs.
// The overview (\`lora-worker --help\`), the dispatch, "did you mean" and each command's help read this one table
// (as Nomad's command/commands.go is the one map its CLI dispatches through and lists). \`run\` imports the
// command's own modules when it runs: the shim and the simulator start without the HTTP stack.
import { UsageError } from "./args.ts";
import type { ClientCommand } from "./client/command.ts";

const CONFIG = "FILE, else $LORA_WORKER_CONFIG, else /etc/lora-worker/config.toml";

export interface Command {
  /** Each form's synopsis after \`lora-worker \`: the help's Usage lines and the overview's left column. */
  usage: readonly string[];
  /** What each form does, one per usage line, as the overview lists it ("\n" breaks its line). */
  summary: readonly string[];
  /** The rest of \`lora-worker NAME --help\`; a client command prints its own module's, with the address options. */
  help?: string;
  /** Talks to a running worker (--url, --token or --config): the overview lists these apart. */
  client?: true;
  run(argv: string[], name: string): Promise<number | undefined>;
}

// A client command's run: its own module, handed to the one place client commands' errors become exit codes.
const client = (load: () => Promise<ClientCommand>) => async (argv: string[], name: string) =>
  (await import("./client/run.ts")).clientCommand(name, COMMANDS[name]!.usage[0]!, await load(), argv);

/** The words a command of several forms takes first (`trainer` takes `bundle`, `install` and `check`). */
export const actionsOf = (command: Command): string[] => command.usage.map((form) => form.split(" ")[1]!);

export const COMMANDS: Readonly<Record<string, Command>> = {
  serve: {
    usage: ["serve [--config FILE]"],
    summary: ["run the HTTP worker (default config /etc/lora-worker/config.toml)"],
    help: `\
Runs the HTTP worker with the config ${CONFIG}: the API on \`listen\`, the trainings it
starts and follows, retention. SIGTERM or SIGINT stops it; running trainings go on and the next start re-adopts
them.

Exit codes: 0 stopped, 2 usage error, 73 state dir in use or damaged, 78 invalid configuration.
`,
    run: async (argv) => {
      await (await import("./serve.ts")).serveCommand(argv);
      return undefined;
    },
  },
  plan: {
    usage: ["plan [--config FILE] REQUEST.json"],
    summary: ["print the exact process a request would start, spawn nothing"],
    help: `\
Checks REQUEST.json (a POST /train body) as the worker would, with the config ${CONFIG}, and
prints the exact process it would start (argv, environment, working directory, dataset TOML) as JSON; or, refused,
the answer the worker would give. Spawns nothing, writes nothing.

Exit codes: 0 planned, 1 request refused, 2 usage error, 78 invalid configuration.
`,
    run: async (argv) => (await import("./plan.ts")).planCommand(argv),
  },
  launch: {
    usage: ["launch [accelerate launch's options] SCRIPT [SCRIPT's options]"],
    summary: ["the simulated trainer (what simulate mode runs instead of accelerate)"],
    help: `\
The simulated trainer: what trainer.mode = "simulate" runs in place of \`accelerate launch\`. It takes the argv
the worker builds and prints sd-scripts' output for it, as the simulate.* keys say. Not for use by hand.
`,
    // The simulator and the shim end at once: what they print goes to the run's log, never to a slow reader.
    run: async (argv) => {
      const { runSimulatedLaunch } = await import("../simulator/simulate.ts");
      process.exit(await runSimulatedLaunch(argv, process.env));
    },
  },
  doctor: {
    usage: ["doctor [--config FILE] [--user NAME] [--group NAME] [--unit FILE] [--dev-dir DIR]"],
    summary: ["check this host as an operator would; one OK/WARN/FAIL line per check\n" +
      "(as --user, else the unit's User=, else the user running it)"],
    help: `\
Checks this host as an operator would, one OK/WARN/FAIL line per check with the fix, then a count: the config
(${CONFIG}), the service account, the trainer's venv, torch, CUDA, bitsandbytes, sd-scripts and its
parser on every launch the worker would make, the packages against the lock (these as \`trainer check\`), the
tokenizers, the handoff root, the model roots, the state dir, the trainer's TMPDIR, nvidia-smi, /dev/nvidia-uvm,
the port and the token file. It checks as --user/--group, else the unit's User=/Group= (--unit, default
/etc/systemd/system/lora-worker.service), else the user running it; run it as root or as that user. --dev-dir is
where the NVIDIA device nodes are (default /dev).

Exit codes: 0 no FAIL, 1 a FAIL, 2 usage error.
`,
    run: async (argv) => (await import("./doctor.ts")).doctorCommand(argv),
  },
  tokenizers: {
    usage: ["tokenizers write [--config FILE]", "tokenizers import [--config FILE] PATH",
      "tokenizers check [--config FILE]"],
    summary: ["write the two CLIP tokenizers the trainer loads offline into\n" +
      "trainer.tokenizer_dir, from what this binary carries (no download)",
      "copy them there from a Hugging Face cache or cache-dir folders",
      "whether trainer.tokenizer_dir holds both, usable"],
    help: `\
write puts the two CLIP tokenizers sd-scripts loads offline into trainer.tokenizer_dir from what this program
carries (CLIP's merges, the vocabulary built from them), with no download; a folder already ready is left as it
is, one that is not is replaced. import copies them from a Hugging Face cache or from folders in
--tokenizer_cache_dir's layout at PATH. Both check every file first and put both in place or neither. check says
whether trainer.tokenizer_dir holds both, usable. The config is ${CONFIG}; only trainer.tokenizer_dir
and state_dir are read from it, so these run before \`trainer install\`.

Exit codes: 0 written, imported or ready, 1 not written, not imported or not usable, 2 usage error, 78 invalid
configuration.
`,
    run: async (argv) => (await import("./tokenizers.ts")).tokenizersCommand(argv, actionsOf(COMMANDS.tokenizers!)),
  },
  trainer: {
    usage: [
      "trainer bundle --sd-scripts DIR --out FILE [--other-sd-scripts] [--python PY] [--python-version X.Y] " +
        "[--platform TAG]",
      "trainer install FILE [--venv DIR] [--python PY]",
      "trainer check [--config FILE] [--user NAME] [--group NAME] [--unit FILE]"],
    summary: ["on a machine with PyPI: sd-scripts, the Python lock and its wheels\n" +
      "in one archive, for a box without internet",
      "a new venv from that archive, offline; prints the config's lines",
      "whether the configured trainer environment runs the worker's jobs"],
    help: `\
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
    run: async (argv) => (await import("./trainer.ts")).trainerCommand(argv, actionsOf(COMMANDS.trainer!)),
  },
  config: {
    usage: ["config template"],
    summary: ["every config key, commented out at its default, under its meaning"],
    help: `\
Prints every config key, commented out at its default, under its meaning: a new host's config.toml.

Exit codes: 0 printed, 2 usage error.
`,
    run: async (argv) => (await import("./config.ts")).configCommand(argv),
  },
  openapi: {
    usage: ["openapi"],
    summary: ["the OpenAPI document the worker serves, with no server or token"],
    help: `\
Prints the OpenAPI 3.1 document this worker serves at GET /openapi.json, as JSON on stdout: no server, no config,
no token. Generate a client from it in CI: lora-worker openapi > openapi.json.

Exit codes: 0 printed, 2 usage error.
`,
    run: async (argv) => (await import("./openapi.ts")).openapiCommand(argv),
  },
  shim: {
    usage: ["shim JOB_DIR"],
    summary: ["internal: the per-job shim that starts the trainer and records its exit"],
    help: `\
Internal: the per-job process the worker starts. It starts the trainer that JOB_DIR/launch.json names, outlives
restarts of the worker and records how the trainer ended in JOB_DIR/exit.json. Not for use by hand.
`,
    run: async (argv) => {
      if (argv.length !== 1) throw new UsageError("shim takes exactly one job directory");
      process.exit(await (await import("../shim/shim.ts")).runShim(argv[0]!));
    },
  },
  submit: {
    usage: ["submit REQUEST.json [--follow] [--json] [--idempotency-key KEY]"],
    summary: ["dispatch a train; --follow draws it until it ends"],
    client: true,
    run: client(async () => (await import("./client/commands/submit.ts")).submit),
  },
  status: {
    usage: ["status [ID] [--json] [--follow]"],
    summary: ["one job, or the active one; --follow draws it live until it ends"],
    client: true,
    run: client(async () => (await import("./client/commands/status.ts")).status),
  },
  jobs: {
    usage: ["jobs [--status STATUS] [--limit N] [--json]"],
    summary: ["recent jobs, one line each, newest first"],
    client: true,
    run: client(async () => (await import("./client/commands/jobs.ts")).jobs),
  },
  logs: {
    usage: ["logs ID [-f|--follow] [--lines N]"],
    summary: ["the trainer log's tail; -f follows it until the job ends"],
    client: true,
    run: client(async () => (await import("./client/commands/logs.ts")).logs),
  },
  cancel: {
    usage: ["cancel ID [--json]"],
    summary: ["stop a job's whole process tree"],
    client: true,
    run: client(async () => (await import("./client/commands/cancel.ts")).cancel),
  },
  pause: {
    usage: ["pause ID [--json]"],
    summary: ["stop a job right after its next saved state, to resume it later"],
    client: true,
    run: client(async () => (await import("./client/commands/pause.ts")).pause),
  },
  resume: {
    usage: ["resume ID [--samples N] [--json] [--follow]"],
    summary: ["a new job continuing a paused, failed or cancelled one from its newest\nsaved state"],
    client: true,
    run: client(async () => (await import("./client/commands/resume.ts")).resume),
  },
  gpu: {
    usage: ["gpu [--json]"],
    summary: ["GPUs with VRAM bars, co-tenants marked"],
    client: true,
    run: client(async () => (await import("./client/commands/gpu.ts")).gpu),
  },
  smoke: {
    usage: ["smoke [--device N]"],
    summary: ["prove this deployment trains: a short real run paused, resumed,\n" +
      "finished and checked, one line per stage"],
    client: true,
    run: client(async () => (await import("./client/commands/smoke.ts")).smoke),
  },
};
