import { statOrNull } from "../fs.ts";
import type { Config } from "../config/schema.ts";
import { fail, fromProblems, ok, type CheckResult } from "./check-result.ts";
import { holdsFor, type RunAs, type ServiceAccount } from "./service-account.ts";

/** SPEC §1: setgid so every file arbo or the worker creates there joins the handoff group; nothing for others. */
export const HANDOFF_MODE = 0o2770;

const octal = (mode: number) => (mode & 0o7777).toString(8).padStart(4, "0");

export async function checkHandoffRoot(config: Config, account: ServiceAccount, runAs: RunAs): Promise<CheckResult> {
  const name = "handoff root";
  const dir = config.handoff_root;
  const create = `install.sh creates it, or: install -d -m ${octal(HANDOFF_MODE)} -o root -g ${account.group} ${dir}`;
  const st = statOrNull(dir);
  if (!st) return fail(name, `${dir} does not exist`, create);
  if (!st.isDirectory()) return fail(name, `${dir} is not a directory`, create);
  const problems: string[] = [];
  const fixes: string[] = [];
  if (account.gid !== null && st.gid !== account.gid) {
    problems.push(`${dir} has group gid ${st.gid}, not ${account.group}`);
    fixes.push(`chgrp ${account.group} ${dir}`);
  }
  if ((st.mode & 0o7777) !== HANDOFF_MODE) {
    const setgid = st.mode & 0o2000 ? "" : ", setgid bit missing";
    problems.push(`${dir} is mode ${octal(st.mode)}${setgid}; want ${octal(HANDOFF_MODE)} (setgid, rwx for owner and group, nothing for others)`);
    fixes.push(`chmod ${octal(HANDOFF_MODE)} ${dir}`);
  }
  if (!(await holdsFor(runAs, ["-w", dir, "-a", "-x", dir]))) {
    problems.push(`${account.user} cannot create files in ${dir}`);
    fixes.push(`make every parent of ${dir} traversable by ${account.user} (chmod o+x)`);
  }
  return fromProblems(name, problems, fixes, `${dir} is ${octal(st.mode)} group ${account.group}, writable by ${account.user}`);
}

export async function checkModelRoot(root: string, account: ServiceAccount, runAs: RunAs): Promise<CheckResult> {
  const name = `model root ${root}`;
  const st = statOrNull(root);
  if (!st) return fail(name, `${root} does not exist`, "create it or fix model_roots in the config");
  if (!st.isDirectory()) return fail(name, `${root} is not a directory`, "point model_roots at directories");
  if (!(await holdsFor(runAs, ["-r", root, "-a", "-x", root]))) {
    return fail(name, `${root} is not readable by ${account.user}`, `chmod o+rx ${root}, or give ${account.group} read on it`);
  }
  return ok(name, `${root} is readable by ${account.user}`);
}

export async function checkStateDir(config: Config, account: ServiceAccount, runAs: RunAs): Promise<CheckResult> {
  const name = "state dir";
  const dir = config.state_dir;
  const own = `install -d -m 0700 -o ${account.user} -g ${account.group} ${dir}`;
  const st = statOrNull(dir);
  if (!st) return fail(name, `${dir} does not exist`, `install.sh creates it, or: ${own}`);
  if (!st.isDirectory()) return fail(name, `${dir} is not a directory`, own);
  if (!(await holdsFor(runAs, ["-w", dir, "-a", "-x", dir]))) {
    return fail(name, `${dir} is not writable by ${account.user}`, `chown ${account.user}:${account.group} ${dir}`);
  }
  return ok(name, `${dir} is writable by ${account.user}`);
}
