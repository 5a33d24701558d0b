import type { Config } from "../config/schema.ts";
import type { CheckResult } from "./check-result.ts";
import { checkNvidiaSmi, checkNvidiaUvm } from "./gpu-checks.ts";
import { checkHandoffRoot, checkModelRoot, checkStateDir } from "./path-checks.ts";
import { checkPort } from "./port-check.ts";
import { checkTrainerPython } from "./python-checks.ts";
import { checkServiceAccount, type RunAs, type ServiceAccount } from "./service-account.ts";
import { checkTokenFile } from "./token-check.ts";
import { checkAccelerate, checkSdScripts } from "./trainer-checks.ts";

export interface DoctorDeps {
  config: Config;
  account: ServiceAccount;
  runAs: RunAs;
  /** Where the NVIDIA device nodes live: /dev on a host, a scratch directory in tests. */
  devDir: string;
  /** How long the trainer's interpreter may take to answer (python-checks.ts); its default is a minute. */
  pythonDeadlineMs?: number;
}

/** Every check after the config, in the order an operator would go through the host by hand; they run at once. */
export async function runChecks(deps: DoctorDeps): Promise<CheckResult[]> {
  const { config, account, runAs } = deps;
  const checks = await Promise.all([
    checkServiceAccount(account),
    checkAccelerate(config, account, runAs),
    checkTrainerPython(deps),
    checkSdScripts(config, account, runAs),
    checkHandoffRoot(config, account, runAs),
    ...config.model_roots.map((root) => checkModelRoot(root, account, runAs)),
    checkStateDir(config, account, runAs),
    checkNvidiaSmi(config),
    checkNvidiaUvm(deps.devDir),
    checkPort(config),
    checkTokenFile(config, account, runAs),
  ]);
  return checks.flat();
}
