import type { Config } from "../config/schema.ts";
import { simulatorEnv } from "../simulator/knobs.ts";
import { type RunTier, TIERS } from "../tiers.ts";

/** What runs in `accelerate`'s place, described once at start-up from `trainer.mode`: dispatch, the recipe and the
 * routes read this, never the mode. */
export interface Trainer {
  /** The executable: accelerate itself, or this program as the simulator. */
  command: string[];
  /** Whether its runs are simulated (and their jobs marked so). */
  simulated: boolean;
  /** Its working directory for a job whose directory is `jobDir`. */
  cwd(jobDir: string): string;
  /** What its environment holds beyond the recipe's: the simulator's knobs. */
  env: Readonly<Record<string, string>>;
  /** The steps a job of `tier` trains, or null when a replayed recording's own count decides. */
  expectedTotal(tier: RunTier): number | null;
}

const tierSteps = (tier: RunTier): number => TIERS[tier].maxTrainSteps;

/** The trainer `config` names: accelerate, or `self` (this program) as the simulator. */
export function describeTrainer(config: Config, self: string[]): Trainer {
  if (config.trainer.mode === "real") {
    const { accelerate, sd_scripts_dir: sdScripts } = config.trainer;
    return { command: [accelerate], simulated: false, cwd: () => sdScripts, env: {}, expectedTotal: tierSteps };
  }
  // A replayed recording trains for its own number of steps, not the tier's.
  const replaying = config.simulate.replay_log !== "";
  return {
    command: self,
    simulated: true,
    // No sd-scripts checkout exists in simulate mode; the job's own directory stands in.
    cwd: (jobDir) => jobDir,
    env: simulatorEnv(config.simulate),
    expectedTotal: (tier) => (replaying ? null : tierSteps(tier)),
  };
}
