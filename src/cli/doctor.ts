import {
  formatCheck,
  formatSummary,
  hasFailure,
  loadDoctorConfig,
  type DoctorCheck,
  type DoctorDeps,
} from "../doctor/doctor.ts";
import {
  checkHandoffRoot,
  checkModelRoot,
  checkPort,
  checkServiceAccount,
  checkStateDir,
  checkReadTokenFile,
  checkTokenFile,
} from "../doctor/host-checks.ts";
import {
  chooseAccountNames,
  createRunAs,
  DEFAULT_UNIT_PATH,
  resolveServiceAccount,
} from "../doctor/service-account.ts";
import { type TrainerDoctor, trainerDoctor } from "../doctor/trainer-doctor.ts";
import { checkBaseModel } from "../doctor/base-model-check.ts";
import { createBackends } from "../supervisor/index.ts";
import { shimCommand } from "./executables.ts";
import { parseArgs, UsageError } from "./args.ts";

const EXIT_FAIL = 1;

// `lora-worker doctor`: one line per check, OK / WARN / FAIL with the fix; exit 1 on any FAIL.
export function doctorCommand(argv: string[]): Promise<number> {
  return checkCommand("doctor", argv, runChecks);
}

// `lora-worker trainer check`: doctor's checks of the trainer's environment only, read and printed as doctor's.
export function trainerCheckCommand(argv: string[]): Promise<number> {
  return checkCommand("trainer check", argv, trainerChecks);
}

async function checkCommand(
  command: string,
  argv: string[],
  checksOf: (deps: DoctorDeps, trainer: TrainerDoctor) => Promise<DoctorCheck[]>,
): Promise<number> {
  const { positional, values } = parseArgs(argv, { values: ["config", "user", "group", "unit", "dev-dir"] });
  if (positional.length > 0) throw new UsageError(`${command} takes no arguments, got ${positional.join(" ")}`);
  const { result, config } = await loadDoctorConfig({ path: values.config, env: process.env });
  const print = (line: string) => process.stdout.write(`${line}\n`);
  print(formatCheck(result));
  if (config === null) {
    print("doctor: the other checks need a config that parses; fix it and run doctor again");
    return EXIT_FAIL;
  }
  const unitPath = values.unit ?? DEFAULT_UNIT_PATH;
  const names = chooseAccountNames({ user: values.user, group: values.group, unitPath });
  const account = resolveServiceAccount(names.user, names.group, names.source);
  // The one place doctor tells a real trainer from the simulator; every check reads the choice from deps.
  const trainer = trainerDoctor(config);
  const devDir = values["dev-dir"] ?? "/dev";
  const deps: DoctorDeps = { config, trainer, account, runAs: createRunAs(account), devDir };
  const checks = [result, ...(await checksOf(deps, trainer))];
  for (const check of checks.slice(1)) print(formatCheck(check));
  print(formatSummary(checks, command));
  return hasFailure(checks) ? EXIT_FAIL : 0;
}

// Every check after the config, in the order an operator would go through the host by hand; they run at once.
async function runChecks(deps: DoctorDeps, trainer: TrainerDoctor): Promise<DoctorCheck[]> {
  const { config, account, runAs } = deps;
  const checks = await Promise.all([
    checkServiceAccount(deps),
    trainer.environment(deps),
    trainer.tokenizers(deps),
    checkHandoffRoot(deps),
    ...config.model_roots.map((root) => checkModelRoot(root, account, runAs)),
    checkBaseModel(deps),
    checkStateDir(config, account, runAs),
    trainer.tmpdir(deps),
    createBackends(config, shimCommand(), process.env).chosen.checks(deps.devDir, trainer.relax),
    checkPort(config, account),
    checkTokenFile(deps),
    checkReadTokenFile(config, account, runAs),
  ]);
  return checks.flat();
}

// The environment the config names: accelerate runs, its Python loads torch, CUDA and AdamW8bit, its sd-scripts
// takes every launch the worker would make, its packages are the lock's.
function trainerChecks(deps: DoctorDeps, trainer: TrainerDoctor): Promise<DoctorCheck[]> {
  return trainer.environment(deps);
}
