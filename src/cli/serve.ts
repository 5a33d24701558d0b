import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { createApp } from "../api/app.ts";
import { MAX_BODY_BYTES } from "../api/json-body.ts";
import { createGpuProbe } from "../gpu/index.ts";
import { createLogger } from "../log/logger.ts";
import { openJobStore } from "../store/job-store.ts";
import { createSupervisor } from "../supervisor/supervisor.ts";
import { BUILD } from "../version.ts";
import { parseArgs, UsageError } from "./args.ts";
import { loadConfigOrExit } from "./load-or-exit.ts";
import { selfCommand, trainerCommand } from "./trainer-command.ts";

export async function serveCommand(argv: string[]): Promise<void> {
  const { positional, options } = parseArgs(argv, ["config"]);
  if (positional.length > 0) throw new UsageError(`serve takes no arguments, got ${positional.join(" ")}`);
  const loaded = await loadConfigOrExit(options.config);
  const { config } = loaded;
  const log = createLogger();
  mkdirSync(join(config.state_dir, "jobs"), { recursive: true, mode: 0o750 });
  const store = openJobStore(join(config.state_dir, "jobs.db"));
  const gpu = createGpuProbe({ nvidiaSmi: config.gpu.nvidia_smi, timeoutMs: config.gpu.probe_timeout_ms, ttlMs: config.gpu.cache_ttl_ms });
  const supervisor = createSupervisor({ store, config, trainerCommand: trainerCommand(config), selfCommand: selfCommand(), now: () => new Date(), log });
  supervisor.reconcile();
  const app = createApp({ loaded, supervisor, gpu, store, log, version: BUILD.version, startedAt: Date.now() });
  const [hostname, port] = splitListen(config.listen);
  const server = Bun.serve({ hostname, port, fetch: app.fetch, maxRequestBodySize: MAX_BODY_BYTES * 4 });
  log.info("listening", {
    url: `http://${server.hostname?.includes(":") ? `[${server.hostname}]` : server.hostname}:${server.port}`,
    version: BUILD.version,
    commit: BUILD.commit,
    trainer_mode: config.trainer.mode,
    simulated: config.trainer.mode === "simulate",
    auth_mode: "none",
    config_file: loaded.file,
    config_defaults_in_use: loaded.defaultsInUse,
    env_overrides: loaded.envOverrides,
  });
  if (config.trainer.mode === "simulate") log.warn("trainer mode is SIMULATE: no real training happens and every job is marked simulated");
  log.warn("auth mode is none: every client that reaches this port can start, read and cancel jobs");
  const stop = (signal: string) => {
    log.info("stopping", { signal, active_job_id: supervisor.activeJobId() });
    void server.stop().then(() => {
      store.close();
      process.exit(0);
    });
  };
  process.on("SIGTERM", () => stop("SIGTERM"));
  process.on("SIGINT", () => stop("SIGINT"));
}

function splitListen(listen: string): [string, number] {
  const at = listen.lastIndexOf(":");
  return [listen.slice(0, at).replace(/^\[(.*)\]$/, "$1"), Number(listen.slice(at + 1))];
}
