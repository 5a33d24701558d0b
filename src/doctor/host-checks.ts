import { readFileSync, statSync, type Stats } from "node:fs";
import { parseTokenLines } from "../auth/tokens.ts";
import { bindFailure, type BindFailure } from "../config/listen.ts";
import type { Config, Listen } from "../config/schema.ts";
import { statOrNull } from "../fs.ts";
import { failed, fromProblems, passed, warned, type DoctorCheck, type DoctorDeps } from "./doctor.ts";
import { holdsFor, type RunAs, type ServiceAccount } from "./service-account.ts";

// SPEC §1: setgid so every file arbo or the worker creates there joins the handoff group; nothing for others.
const HANDOFF_MODE = 0o2770;
const HEALTHZ_TIMEOUT_MS = 2000;

const octal = (mode: number) => (mode & 0o7777).toString(8).padStart(4, "0");

export function checkServiceAccount({ account, trainer }: DoctorDeps): DoctorCheck {
  const name = "service account";
  const ranAs = `uid ${process.geteuid?.()}`;
  const missing = [
    account.uid === null ? `user ${account.user} does not exist` : null,
    account.gid === null ? `group ${account.group} does not exist` : null,
  ].filter((m): m is string => m !== null);
  if (missing.length > 0) {
    const fix = "run install.sh, which creates them, or pass --user/--group naming the unit's User= and Group=";
    return failed(name, `${missing.join("; ")}${namedBy(account)} (the checks below ran as ${ranAs})`, fix);
  }
  const who = `${account.user} (uid ${account.uid}) with group ${account.group} (gid ${account.gid})`;
  if (account.source.kind === "running") {
    const none = `no unit at ${account.source.unitPath} and no --user`;
    if (trainer.anyAccount) {
      const anyone = 'trainer.mode is "simulate": the worker runs as whoever starts it';
      return passed(name, `${who}, the user running doctor: ${none}, and ${anyone}`);
    }
    const fix = "install with install.sh (it writes the unit's User=), " +
      "or pass --user/--group naming the account that runs serve";
    const unknown = `${none}, so which account serve runs as is unknown; ` +
      `the checks below ran as ${who}, the user running doctor`;
    return failed(name, unknown, fix);
  }
  if (account.switchedBy === "none") {
    const stuck = `doctor runs as ${ranAs} and cannot switch, so the checks below ran as ${ranAs}`;
    return warned(name, `${who}${namedBy(account)}; ${stuck}`, `run doctor as root (sudo) or as ${account.user}`);
  }
  return passed(name, `${who}${namedBy(account)}; the checks below ran as ${account.user}`);
}

const namedBy = (account: ServiceAccount) =>
  account.source.kind === "unit" ? ` (named by ${account.source.path})` : "";

export async function checkHandoffRoot({ config, account, runAs, trainer }: DoctorDeps): Promise<DoctorCheck> {
  const name = "handoff root";
  const dir = config.handoff_root;
  const create = `install.sh creates it, or: install -d -m ${octal(HANDOFF_MODE)} -o root -g ${account.group} ${dir}`;
  const st = statOrNull(dir);
  if (!st) return failed(name, `${dir} does not exist`, create);
  if (!st.isDirectory()) return failed(name, `${dir} is not a directory`, create);
  const problems: string[] = [];
  const fixes: string[] = [];
  if (account.gid !== null && st.gid !== account.gid) {
    problems.push(`${dir} has group gid ${st.gid}, not ${account.group}`);
    fixes.push(`chgrp ${account.group} ${dir}`);
  }
  if ((st.mode & 0o7777) !== HANDOFF_MODE) {
    const setgid = st.mode & 0o2000 ? "" : ", setgid bit missing";
    const want = `${octal(HANDOFF_MODE)} (setgid, rwx for owner and group, nothing for others)`;
    problems.push(`${dir} is mode ${octal(st.mode)}${setgid}; want ${want}`);
    fixes.push(`chmod ${octal(HANDOFF_MODE)} ${dir}`);
  }
  const sharing = problems.length; // group and mode: how arbo shares the directory, which only the deployment has
  if (!(await holdsFor(runAs, ["-w", dir, "-a", "-x", dir]))) {
    problems.push(`${account.user} cannot create files in ${dir}`);
    fixes.push(`make every parent of ${dir} traversable by ${account.user} (chmod o+x)`);
  }
  const fine = `${dir} is ${octal(st.mode)} group ${account.group}, writable by ${account.user}`;
  const check = fromProblems(name, problems, fixes, fine);
  if (problems.length > sharing) return check;
  return trainer.relax(check, "no arbo shares the directory through the group");
}

export async function checkModelRoot(root: string, account: ServiceAccount, runAs: RunAs): Promise<DoctorCheck> {
  const name = `model root ${root}`;
  const st = statOrNull(root);
  const create = `install.sh creates the default one, or: install -d -m 0755 ${root}; or fix model_roots in the config`;
  if (!st) return failed(name, `${root} does not exist`, create);
  if (!st.isDirectory()) return failed(name, `${root} is not a directory`, "point model_roots at directories");
  if (!(await holdsFor(runAs, ["-r", root, "-a", "-x", root]))) {
    const fix = `chmod o+rx ${root}, or give ${account.group} read on it`;
    return failed(name, `${root} is not readable by ${account.user}`, fix);
  }
  return passed(name, `${root} is readable by ${account.user}`);
}

export async function checkStateDir(config: Config, account: ServiceAccount, runAs: RunAs): Promise<DoctorCheck> {
  const name = "state dir";
  const dir = config.state_dir;
  const own = `install -d -m 0700 -o ${account.user} -g ${account.group} ${dir}`;
  const st = statOrNull(dir);
  if (!st) return failed(name, `${dir} does not exist`, `install.sh creates it, or: ${own}`);
  if (!st.isDirectory()) return failed(name, `${dir} is not a directory`, own);
  if (!(await holdsFor(runAs, ["-w", dir, "-a", "-x", dir]))) {
    return failed(name, `${dir} is not writable by ${account.user}`, `chown ${account.user}:${account.group} ${dir}`);
  }
  return passed(name, `${dir} is writable by ${account.user}`);
}

export async function checkPort(config: Config, account: ServiceAccount): Promise<DoctorCheck> {
  const name = "port";
  const { text, port, url } = config.listen;
  if (url === null) return passed(name, `listen = "${text}": the worker picks a free port`);
  const bind = tryBind(config.listen, account);
  if (bind === null) return passed(name, `${text} is free`);
  if (bind.code !== "EADDRINUSE") return failed(name, `cannot listen on ${text}: ${bind.cause}`, bind.fix);
  const healthz = `${url}/healthz`;
  const worker = await workerOnPort(healthz);
  // One worker per state dir: one with another state dir is another worker, whatever its version.
  if (worker && worker.state_dir === config.state_dir) {
    const ours = `lora-worker ${worker.version}, trainer mode ${worker.trainer_mode}`;
    return passed(name, `${text} is held by this worker (${ours})`);
  }
  if (worker) {
    const file = worker.config_file ?? "none";
    const which = `lora-worker ${worker.version} with state dir ${worker.state_dir}, config ${file}`;
    const fix = `stop that worker (find it with: ss -ltnp 'sport = :${port}'), or give one of them another listen`;
    return failed(name, `${text} is held by another worker (${which}), not the one this config describes`, fix);
  }
  return failed(name, `${text} is held by another program (${healthz} is not lora-worker's)`, bind.fix);
}

// Bound by doctor itself, then judged for the service user: doctor often runs as root, which may bind any port,
// and the unit grants the worker no CAP_NET_BIND_SERVICE.
function tryBind(listen: Listen, account: ServiceAccount): BindFailure | null {
  try {
    Bun.listen({ hostname: listen.host, port: listen.port, socket: { data() {} } }).stop(true);
  } catch (error) {
    return bindFailure(listen, error);
  }
  if (account.uid !== 0 && listen.port < unprivilegedPortStart()) return bindFailure(listen, { code: "EACCES" });
  return null;
}

// The first port an unprivileged process may bind; the kernel's default where the file cannot be read.
function unprivilegedPortStart(): number {
  try {
    return Number(readFileSync("/proc/sys/net/ipv4/ip_unprivileged_port_start", "utf8").trim());
  } catch {
    return 1024;
  }
}

interface WorkerOnPort {
  version: string;
  trainer_mode: string;
  state_dir: string;
  config_file: string | null;
}

// Our /healthz shape (SPEC §3): anything else holding the port is another program.
async function workerOnPort(url: string): Promise<WorkerOnPort | null> {
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(HEALTHZ_TIMEOUT_MS) });
    const body = (await res.json()) as Record<string, unknown>;
    const state = body.state_dir as { path?: unknown } | undefined;
    const ours = res.ok && body.status === "ok" && typeof body.version === "string" &&
      typeof body.trainer_mode === "string" && "auth_mode" in body && typeof state?.path === "string";
    if (!ours) return null;
    const config = typeof body.config_file === "string" ? body.config_file : null;
    const [version, mode] = [body.version as string, body.trainer_mode as string];
    return { version, trainer_mode: mode, state_dir: state.path as string, config_file: config };
  } catch {
    return null;
  }
}

// The API tokens: one per line, readable by the worker, by nobody outside root and the service group.
export async function checkTokenFile({ config, account, runAs, trainer }: DoctorDeps): Promise<DoctorCheck> {
  const name = "token file";
  if (config.auth.mode === "none") {
    const open = 'auth.mode is "none": every client that reaches the port can start, read and cancel jobs';
    return warned(name, open, 'set auth.mode = "token"');
  }
  const file = config.auth.token_file;
  let st: Stats;
  try {
    st = statSync(file);
  } catch {
    const fix = `install.sh creates it, or: umask 077; openssl rand -hex 32 > ${file}`;
    const missing = failed(name, `${file} does not exist`, fix);
    if (!config.listen.loopback) return missing;
    const why = `serve runs without a token on the loopback listen ${config.listen.text}, open to every local user`;
    return trainer.relax(missing, why);
  }
  return judgeTokenFile(name, file, st, account, runAs);
}

// The read-only tokens (screens, dashboards): as closed as the tokens that act, and none of them one of those.
export async function checkReadTokenFile(config: Config, account: ServiceAccount, runAs: RunAs): Promise<DoctorCheck> {
  const name = "read-token file";
  const file = config.auth.read_token_file;
  if (config.auth.mode === "none") return passed(name, 'auth.mode is "none": no token is read');
  let st: Stats;
  try {
    st = statSync(file);
  } catch {
    return passed(name, `${file} does not exist: no read-only tokens`);
  }
  const judged = await judgeTokenFile(name, file, st, account, runAs);
  if (judged.status !== "OK") return judged;
  const shared = sharedTokenLine(config.auth.token_file, file);
  if (shared === null) return judged;
  return failed(name, `${file} line ${shared} holds a token that ${config.auth.token_file} holds too: serve refuses ` +
    "to start", `a token either acts or only reads: remove it from one of the two files`);
}

async function judgeTokenFile(name: string, file: string, st: Stats, account: ServiceAccount, runAs: RunAs) {
  const safe = `chown root:${account.group} ${file} && chmod 0640 ${file}`;
  if (!st.isFile()) {
    return failed(name, `${file} is not a regular file`, "replace it with a file holding one token per line");
  }
  const problems: string[] = [];
  // Permission bits only: a token file's setuid, setgid and sticky bits mean nothing.
  const mode = octal(st.mode & 0o777);
  if (st.mode & 0o007) problems.push(`${file} is mode ${mode}, open to every user`);
  if (st.uid !== 0 && st.uid !== account.uid) {
    problems.push(`${file} is owned by uid ${st.uid}, not root or ${account.user}`);
  }
  if (!(await holdsFor(runAs, ["-r", file]))) problems.push(`${file} is not readable by ${account.user}`);
  const unusable = problems.length === 0 ? tokenProblems(file) : [];
  if (unusable.length > 0) {
    const fix = `write one token a line, as serve reads them: umask 077; openssl rand -hex 32 > ${file}`;
    return failed(name, unusable.join("; "), fix);
  }
  return fromProblems(name, problems, [safe], `${file} is ${mode}, owner uid ${st.uid}, readable by ${account.user}`);
}

// The line of `readFile` whose token `tokenFile` holds too, or null (either unreadable here: the other checks say).
function sharedTokenLine(tokenFile: string, readFile: string): number | null {
  let full: Set<string>;
  let lines: string[];
  try {
    full = new Set(readFileSync(tokenFile, "utf8").split("\n").map((l) => l.trim()));
    lines = readFileSync(readFile, "utf8").split("\n").map((l) => l.trim());
  } catch {
    return null;
  }
  const at = lines.findIndex((line) => line !== "" && !line.startsWith("#") && full.has(line));
  return at === -1 ? null : at + 1;
}

// The same parser serve uses, so doctor passes exactly the files serve accepts.
function tokenProblems(file: string): string[] {
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch {
    return []; // unreadable by doctor itself (not root): the readability check above speaks for the worker
  }
  const parsed = parseTokenLines(text, file);
  return parsed.ok ? [] : parsed.error;
}
