import type { Config } from "../config/schema.ts";
import { localBackend } from "./backends/local/local-backend.ts";
import { slurmBackend } from "./backends/slurm/slurm-backend.ts";
import type { Backend, BackendEnvironment, BackendKind, ShimCommand } from "./placement.ts";

/** The configured backend, and the one that placed a run found after a restart. */
export interface Backends {
  chosen: Backend;
  /** The backend of that kind; null for a kind this program has none of. */
  of(kind: string): Backend | null;
}

// Each backend by its kind, made when a run or the config first needs it.
const MAKERS: Record<BackendKind, (config: Config, shim: ShimCommand, environment: BackendEnvironment) => Backend> = {
  local: localBackend,
  slurm: slurmBackend,
};

// A run stays where it started: after a switch of backend, what the other one placed is taken back through it, so a
// change of backend leaves no run unsupervised.
export function createBackends(config: Config, shim: ShimCommand, environment: BackendEnvironment): Backends {
  const made = new Map<BackendKind, Backend>();
  const known = (kind: string): kind is BackendKind => Object.hasOwn(MAKERS, kind);
  const of = (kind: string): Backend | null => {
    if (!known(kind)) return null;
    const backend = made.get(kind) ?? MAKERS[kind](config, shim, environment);
    made.set(kind, backend);
    return backend;
  };
  return { chosen: of(config.trainer.backend)!, of };
}
