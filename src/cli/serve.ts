import type { Server } from "bun";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { setUpAuth, type AuthGate } from "../auth/setup.ts";
import { bindFailure } from "../config/listen.ts";
import type { Config } from "../config/schema.ts";
import { createLogger, formatFor, type LogFormat, type Logger } from "../logger.ts";
import { acquireInstanceLock, LockHeld } from "../store/state-health.ts";
import { openJobStore, type JobStore } from "../store/job-store.ts";
import { StoreUnusable } from "../store/open.ts";
import { ownMemoryEvents } from "../os/proc.ts";
import { jobsDir } from "../job-dir/job-dir.ts";
import { createRetention } from "../supervisor/index.ts";
import { tokenizerDir, tokenizersProblems } from "../tokenizers/layout.ts";
import { BUILD } from "../version.ts";
import { parseArgs, UsageError } from "./args.ts";
import { chooseTrainer, shimCommand } from "./executables.ts";
import { EXIT_CONFIG, EXIT_STATE, loadConfigOrExit, refuseToStart } from "./start.ts";
import { createWorker } from "./worker.ts";

// An idle keep-alive connection, or a handler slower than this, is closed; the few answers bounded by their
// own deadline (cancel, gpu-status) lift it. Headers must arrive whole within Bun's fixed ~10 s regardless.
const IDLE_TIMEOUT_S = 30;
// Far above MAX_BODY_BYTES on purpose: readJsonBody refuses past 64 KiB itself, with a detail and a closed
// connection, where Bun's own limit would answer a bare 413.
const TRANSPORT_BODY_LIMIT = 2 ** 30;
// SIGTERM ends the worker within this even if closing the server hangs; trainings run on (KillMode=process).
const STOP_DEADLINE_MS = 2000;

export async function serveCommand(argv: string[]): Promise<void> {
  const { positional, values } = parseArgs(argv, { values: ["config"] });
  if (positional.length > 0) throw new UsageError(`serve takes no arguments, got ${positional.join(" ")}`);
  // The log is on stdout and refusals on stderr; under the unit both are the journal's stream.
  const refusals = formatFor(2, process.env.JOURNAL_STREAM);
  const log = createLogger(formatFor(1, process.env.JOURNAL_STREAM));
  const loaded = await loadConfigOrExit(values.config, refusals);
  const { config } = loaded;
  const auth = authOrExit(config, log, refusals);
  mkdirSync(jobsDir(config.state_dir), { recursive: true, mode: 0o750 });
  const { lock, store } = claimStateOrExit(config.state_dir, refusals);
  let server: Server<undefined> | null = null;
  // Before anything is adopted or listens: a SIGTERM from here on takes the stop path, whenever it lands.
  installStopPath({ log, store, lock, server: () => server });
  const now = () => new Date();
  const { keep_days: keepDays, keep_last: keepLast } = config.retention;
  const retention = createRetention({ store, stateDir: config.state_dir, keepDays, keepLast, now, log });
  let keepOpen: (req: Request) => void = () => {};
  const trainer = chooseTrainer(config);
  const { app, gpu, supervisor } = createWorker({
    loaded,
    store,
    log,
    auth,
    now,
    trainer,
    shim: shimCommand(),
    environment: process.env,
    memoryEvents: ownMemoryEvents(),
    keepOpen: (req) => keepOpen(req),
    version: BUILD.version,
    startedAt: Date.now(),
    stateBytes: retention.stateBytes,
  });
  supervisor.reconcile();
  // One probe at start-up so the log and /healthz say at once whether nvidia-smi answers.
  void gpu.read().then((r) => {
    if (r.ok) log.info("gpu probe", { devices: r.value.length });
    else log.warn("gpu probe failed", { detail: r.error });
  });
  server = listenOrExit(config, app.fetch, { store, lock }, refusals);
  keepOpen = (req) => server?.timeout(req, 0);
  const host = server.hostname?.includes(":") ? `[${server.hostname}]` : server.hostname;
  log.info("listening", {
    url: `http://${host}:${server.port}`,
    version: BUILD.version,
    commit: BUILD.commit,
    trainer_mode: config.trainer.mode,
    simulated: trainer.simulated,
    auth_mode: auth.mode,
    ...(auth.source && {
      auth_token_source: auth.source.kind,
      auth_token_path: auth.source.path,
      auth_tokens: auth.tokens?.size,
    }),
    config_file: loaded.file,
    config_defaults_in_use: loaded.defaultsInUse,
    env_overrides: loaded.envOverrides,
  });
  if (trainer.simulated) {
    log.warn("trainer mode is SIMULATE: no real training happens and every job is marked simulated");
  }
  warnIfOpen(auth, config, log);
  if (!trainer.simulated) warnIfNoTokenizers(config, log);
  // Its first round walks the state dir and the history: after the worker listens, not in its way.
  retention.start();
}

interface StopDeps {
  log: Logger;
  store: JobStore;
  lock: { release(): void };
  server: () => Server<undefined> | null;
}

// SIGTERM and SIGINT stop the worker (trainings run on); the last line of defence logs an unhandled rejection.
function installStopPath({ log, store, lock, server }: StopDeps): void {
  const stop = (signal: string) => {
    log.info("stopping", { signal, active_job_id: store.activeJobs()[0]?.id ?? null });
    setTimeout(() => process.exit(0), STOP_DEADLINE_MS);
    // Event streams and keep-alive connections would hold a graceful stop open for as long as they last.
    void Promise.resolve(server()?.stop(true)).finally(() => {
      store.close();
      lock.release();
      process.exit(0);
    });
  };
  process.on("SIGTERM", () => stop("SIGTERM"));
  process.on("SIGINT", () => stop("SIGINT"));
  // Background work catches its own errors; one that slips through is a bug to log, not a reason to leave running
  // trainings unsupervised.
  process.on("unhandledRejection", (err) => {
    log.error("unhandled rejection", { error: String(err), stack: (err as Error)?.stack });
  });
}

// An address that cannot be bound is the configuration's fault (or the host's) and a restart would meet it again:
// one line that names the address and why, EX_CONFIG (the unit's RestartPreventExitStatus=), the state dir let go
// as a clean stop would, so the next start needs no integrity check. Jobs reconcile adopted run on untouched.
function listenOrExit(
  config: Config,
  fetch: (req: Request) => Response | Promise<Response>,
  held: { store: JobStore; lock: { release(): void } },
  refusals: LogFormat,
): Server<undefined> {
  try {
    return Bun.serve({
      hostname: config.listen.host,
      port: config.listen.port,
      fetch,
      maxRequestBodySize: TRANSPORT_BODY_LIMIT,
      idleTimeout: IDLE_TIMEOUT_S,
    });
  } catch (error) {
    const { cause, fix } = bindFailure(config.listen, error);
    held.store.close();
    held.lock.release();
    const reason = `cannot listen on ${config.listen.text}`;
    refuseToStart(refusals, { reason, errors: [`${cause}; ${fix}`], exitCode: EXIT_CONFIG });
  }
}

// One worker per state dir, and never one serving from a damaged database.
function claimStateOrExit(stateDir: string, refusals: LogFormat) {
  try {
    const lock = acquireInstanceLock(stateDir);
    try {
      // The integrity check, whose cost grows with the history, only after a worker that did not stop cleanly.
      return { lock, store: openJobStore(join(stateDir, "jobs.db"), { integrityCheck: !lock.cleanBefore }) };
    } catch (err) {
      lock.release();
      throw err;
    }
  } catch (err) {
    if (!(err instanceof LockHeld || err instanceof StoreUnusable)) throw err;
    const reason = err instanceof LockHeld ? "the state directory is in use" : "the job database is damaged";
    refuseToStart(refusals, { reason, errors: [err.message], exitCode: EXIT_STATE });
  }
}

// Refusing to start is a configuration error: same exit code, same shape of message.
function authOrExit(config: Config, log: Logger, refusals: LogFormat): AuthGate {
  const setup = setUpAuth({ config, credentialsDirectory: process.env.CREDENTIALS_DIRECTORY, log });
  if (setup.ok) return setup.value;
  refuseToStart(refusals, { reason: "authentication is not set up", errors: setup.error, exitCode: EXIT_CONFIG });
}

// Every real run would fail before its first step (tokenizer_missing): said at start-up, not at the first job.
function warnIfNoTokenizers(config: Config, log: Logger): void {
  const dir = tokenizerDir(config);
  const problems = tokenizersProblems(dir);
  if (problems.length === 0) return;
  const fix = "lora-worker tokenizers write, or tokenizers import PATH, then lora-worker doctor";
  const what = `the CLIP tokenizers are not ready in ${dir}: every real run will fail (tokenizer_missing)`;
  log.warn(what, { problems, fix });
}

function warnIfOpen(auth: AuthGate, config: Config, log: Logger): void {
  const { text } = config.listen;
  if (auth.mode === "none") {
    log.warn(
      `auth mode is none (auth.mode = "none"): every client that reaches ${text} can start, read and cancel jobs`,
    );
  }
  if (auth.mode === "none-loopback") {
    log.warn(
      `auth mode is none-loopback: no token at ${config.auth.token_file}, ` +
        `so any local user can start, read and cancel jobs on ${text}; create the file to require a token`,
    );
  }
}
