import type { Config } from "../config/schema.ts";
import { createSlurmClient } from "../os/slurm.ts";
import { localBackend, type ShimCommand } from "./local.ts";
import type { Backend, BackendKind } from "./placement.ts";
import { slurmBackend } from "./slurm.ts";

/** The configured backend, and the one that placed a run found after a restart. */
export interface Backends {
  chosen: Backend;
  of(kind: BackendKind): Backend;
}

// A run stays where it started: after a switch of backend, what the other one placed is adopted through it, so a
// change of backend leaves no run unsupervised. Slurm's client is made only when a run or the config needs it.
export function createBackends(config: Config, shim: ShimCommand, slurmConf: string | undefined): Backends {
  const local = localBackend(shim);
  let slurm: Backend | null = null;
  const of = (kind: BackendKind) =>
    kind === "local" ? local : (slurm ??= slurmBackend(createSlurmClient(config.slurm, slurmConf), config, shim));
  return { chosen: of(config.trainer.backend), of };
}
