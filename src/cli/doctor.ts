import { loadDoctorConfig } from "../doctor/config-check.ts";
import { runChecks } from "../doctor/doctor.ts";
import { formatCheck, formatSummary, hasFailure } from "../doctor/report.ts";
import { createRunAs, resolveServiceAccount } from "../doctor/service-account.ts";
import { parseArgs, UsageError } from "./args.ts";

const DEFAULT_USER = "llmuser";
const DEFAULT_GROUP = "arbotrain";
const EXIT_FAIL = 1;

/** `lora-worker doctor`: one line per check, OK / WARN / FAIL with the fix; exit 1 on any FAIL. */
export async function doctorCommand(argv: string[]): Promise<number> {
  const { positional, options } = parseArgs(argv, ["config", "user", "group", "dev-dir"]);
  if (positional.length > 0) throw new UsageError(`doctor takes no arguments, got ${positional.join(" ")}`);
  const { result, config } = await loadDoctorConfig({ path: options.config, env: process.env });
  const print = (line: string) => process.stdout.write(`${line}\n`);
  print(formatCheck(result));
  if (config === null) {
    print("doctor: the other checks need a config that parses; fix it and run doctor again");
    return EXIT_FAIL;
  }
  const account = resolveServiceAccount(options.user ?? DEFAULT_USER, options.group ?? DEFAULT_GROUP);
  const checks = [result, ...(await runChecks({ config, account, runAs: createRunAs(account), devDir: options["dev-dir"] ?? "/dev" }))];
  for (const check of checks.slice(1)) print(formatCheck(check));
  print(formatSummary(checks));
  return hasFailure(checks) ? EXIT_FAIL : 0;
}
