import { boundedRun, type RunResult } from "./bounded-run.ts";
import { fail, ok, warn, type CheckResult } from "./check-result.ts";

/** The identity the unit runs the worker as (`User=`, `Group=`); ids are null when the name does not resolve. */
export interface ServiceAccount {
  user: string;
  group: string;
  uid: number | null;
  gid: number | null;
  /** How doctor runs a command as that identity: switching with setpriv (as root), directly (already it), or not at all. */
  switchedBy: "setpriv" | "self" | "none";
}

export type RunAs = (argv: string[], opts?: { env?: Record<string, string>; timeoutMs?: number }) => Promise<RunResult>;

const DEFAULT_RUN_TIMEOUT_MS = 10_000;
const BASE_PATH = "/usr/local/bin:/usr/bin:/bin";

// getent, not /etc/passwd: the service user may come from LDAP or sssd.
function lookupId(database: "passwd" | "group", name: string): number | null {
  const res = Bun.spawnSync(["getent", database, name], { stdout: "pipe", stderr: "ignore" });
  if (res.exitCode !== 0) return null;
  const id = Number(res.stdout.toString().split(":")[2]);
  return Number.isInteger(id) ? id : null;
}

export function resolveServiceAccount(user: string, group: string): ServiceAccount {
  const uid = lookupId("passwd", user);
  const gid = lookupId("group", group);
  const euid = process.geteuid?.() ?? -1;
  const canSwitch = euid === 0 && uid !== null && gid !== null && Bun.which("setpriv") !== null;
  const switchedBy = uid !== null && uid === euid ? "self" : canSwitch ? "setpriv" : "none";
  return { user, group, uid, gid, switchedBy };
}

/** Runs argv as the service account when doctor can become it, else as the current user. */
export function createRunAs(account: ServiceAccount): RunAs {
  const prefix = account.switchedBy === "setpriv"
    ? ["setpriv", `--reuid=${account.uid}`, `--regid=${account.gid}`, "--init-groups", "--"]
    : [];
  return (argv, opts = {}) => boundedRun([...prefix, ...argv], { PATH: BASE_PATH, LANG: "C.UTF-8", ...opts.env }, opts.timeoutMs ?? DEFAULT_RUN_TIMEOUT_MS);
}

/** `test EXPR` as the service account: true when the expression holds for it. */
export async function holdsFor(runAs: RunAs, testArgs: string[]): Promise<boolean> {
  return (await runAs(["test", ...testArgs])).exitCode === 0;
}

export function checkServiceAccount(account: ServiceAccount): CheckResult {
  const name = "service account";
  const missing = [
    account.uid === null ? `user ${account.user} does not exist` : null,
    account.gid === null ? `group ${account.group} does not exist` : null,
  ].filter((m): m is string => m !== null);
  if (missing.length > 0) {
    return fail(name, `${missing.join("; ")} (the checks below ran as uid ${process.geteuid?.()})`, "run install.sh, which creates them, or pass --user/--group naming the unit's User= and Group=");
  }
  const who = `${account.user} (uid ${account.uid}) with group ${account.group} (gid ${account.gid})`;
  if (account.switchedBy === "none") {
    return warn(name, `${who}; doctor runs as uid ${process.geteuid?.()} and cannot switch, so the checks below ran as uid ${process.geteuid?.()}`, `run doctor as root (sudo) or as ${account.user}`);
  }
  return ok(name, `${who}; the checks below ran as ${account.user}`);
}
