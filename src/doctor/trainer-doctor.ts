import type { Config } from "../config/schema.ts";
import { warned, type DoctorCheck, type DoctorDeps, type TrainerRules } from "./doctor.ts";
import { checkPackages, checkSdScriptsArgv } from "./sd-scripts-checks.ts";
import { checkLikeness } from "./likeness-check.ts";
import { checkTrainerTmpdir } from "./tmpdir-check.ts";
import { checkTokenizers } from "./tokenizer-checks.ts";
import { checkAccelerate, checkSdScripts, checkTrainerPython, STAGES } from "./trainer-checks.ts";

/** What doctor asks of the trainer, chosen once from trainer.mode, as it asks the configured backend for its own. */
export interface TrainerDoctor extends TrainerRules {
  /** The trainer's environment: accelerate, its Python's torch, CUDA and bitsandbytes, sd-scripts, its parser, the
   * packages against the lock, the face scorer. */
  environment(deps: DoctorDeps): Promise<DoctorCheck[]>;
  tokenizers(deps: DoctorDeps): Promise<DoctorCheck>;
  /** The trainer's TMPDIR link, and the sockets its data loader binds under it. */
  tmpdir(deps: DoctorDeps): Promise<DoctorCheck>;
}

export const SIMULATE_SKIP = 'trainer.mode is "simulate": not checked, no real training runs';

const ENVIRONMENT = ["accelerate", ...STAGES, "sd-scripts", "sd-scripts argv", "python packages"];

const REAL: TrainerDoctor = {
  async environment(deps) {
    const { config, account, runAs } = deps;
    const checks = await Promise.all([
      checkAccelerate(config, account, runAs),
      checkTrainerPython(deps),
      checkSdScripts(config, account, runAs),
      checkSdScriptsArgv(deps),
      checkPackages(deps),
      checkLikeness(deps),
    ]);
    return checks.flat();
  },
  tokenizers: checkTokenizers,
  tmpdir: (deps) => checkTrainerTmpdir(deps, { sockets: true }),
  relax: (check) => check,
  anyAccount: false,
};

// The same lines, each saying why the simulator needs none of it; but the face scorer scores simulated previews too.
const SIMULATED: TrainerDoctor = {
  environment: async (deps) => [...ENVIRONMENT.map((name) => warned(name, SIMULATE_SKIP)), await checkLikeness(deps)],
  tokenizers: async () => warned("tokenizers", SIMULATE_SKIP),
  tmpdir: (deps) => checkTrainerTmpdir(deps, { sockets: false }),
  relax: (check, why) => check.status !== "FAIL"
    ? check
    : { ...check, status: "WARN", detail: `${check.detail}; trainer.mode is "simulate": ${why}` },
  anyAccount: true,
};

/** The trainer's doctor for trainer.mode: `lora-worker doctor` and `trainer check` choose it once. */
export function trainerDoctor(config: Config): TrainerDoctor {
  return config.trainer.mode === "simulate" ? SIMULATED : REAL;
}
