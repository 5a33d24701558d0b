// The supervisor's one face to the rest of the worker: what builds it (the supervisor, the backends, retention),
// what the routes and dispatch read of it, and the check of a saved state a resume makes before it claims.
export {
  createSupervisor,
  PreparationCancelled,
  type Prepared,
  type LiveProgress,
  type Supervisor,
  type SupervisorDeps,
} from "./supervisor.ts";
export { createBackends } from "./backend.ts";
export { createRetention } from "./retention.ts";
export { usableState } from "./checkpoints.ts";
export type { Backend, BackendEnvironment, ShimCommand } from "./placement.ts";
export type { LikenessScoring } from "./likeness.ts";
