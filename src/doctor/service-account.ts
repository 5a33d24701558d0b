import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { signalGroup } from "../os/terminate.ts";
import { BASE_PATH } from "../recipe/command.ts";

// Where install.sh puts the unit; its User= and Group= are who the deployed worker runs as.
export const DEFAULT_UNIT_PATH = "/etc/systemd/system/lora-worker.service";

// Whose account doctor checks as, and why that one: named with --user, by the installed unit, or the user
// running doctor.
type AccountSource = { kind: "option" } | { kind: "unit"; path: string } | { kind: "running"; unitPath: string };

interface AccountNames {
  user: string;
  group: string;
  source: AccountSource;
}

/**
 * --user/--group first, then the installed unit's User=/Group=, then the user running doctor; a missing group is
 * the user's own.
 */
export function chooseAccountNames(options: { user?: string; group?: string; unitPath: string }): AccountNames {
  const unit = readUnitAccount(options.unitPath);
  const source: AccountSource = options.user !== undefined
    ? { kind: "option" }
    : unit
      ? { kind: "unit", path: options.unitPath }
      : { kind: "running", unitPath: options.unitPath };
  const user = options.user ?? unit?.user ?? runningUser();
  const group = options.group ?? unit?.group ?? primaryGroup(user);
  return { user, group, source };
}

// systemd's own default: a unit without User= runs as root; drop-ins override the unit, later ones win.
function readUnitAccount(path: string): { user: string; group?: string } | null {
  const texts = [readOrNull(path), ...dropIns(path).map(readOrNull)];
  if (texts[0] === null) return null;
  let user = "root";
  let group: string | undefined;
  for (const line of texts.join("\n").split("\n")) {
    const [, key, value] = /^\s*(User|Group)\s*=\s*(\S*)\s*$/.exec(line) ?? [];
    if (key === "User") user = value || "root";
    if (key === "Group") group = value || undefined;
  }
  return { user, group };
}

function dropIns(unitPath: string): string[] {
  const dir = `${unitPath}.d`;
  try {
    return readdirSync(dir).filter((name) => name.endsWith(".conf")).sort().map((name) => join(dir, name));
  } catch {
    return [];
  }
}

function readOrNull(path: string): string | null {
  try {
    return readFileSync(path, "utf8");
  } catch {
    return null;
  }
}

// By uid, not $USER (Bun's userInfo() reads the environment); a uid without a passwd entry is named by its number.
function runningUser(): string {
  const uid = String(process.geteuid?.() ?? "");
  return getent("passwd", uid)?.[0] ?? uid;
}

// As systemd does without Group=; a user that does not exist is named as its own group (the check fails on the user).
function primaryGroup(user: string): string {
  const gid = getent("passwd", user)?.[3];
  if (gid === undefined) return user;
  return getent("group", gid)?.[0] ?? gid;
}

// getent, not /etc/passwd: the service user may come from LDAP or sssd.
function getent(database: "passwd" | "group", key: string): string[] | null {
  const res = Bun.spawnSync(["getent", database, key], { stdout: "pipe", stderr: "ignore" });
  return res.exitCode === 0 ? res.stdout.toString().trim().split(":") : null;
}

/** The identity the unit runs the worker as (`User=`, `Group=`); ids are null when the name does not resolve. */
export interface ServiceAccount {
  user: string;
  group: string;
  uid: number | null;
  gid: number | null;
  /** How doctor runs a command as that identity: with setpriv (as root), directly (already it), or not at all. */
  switchedBy: "setpriv" | "self" | "none";
  /** Why this account: named with --user, by the installed unit, or the user running doctor. */
  source: AccountSource;
}

export type RunAs = (argv: string[], opts?: { env?: Record<string, string>; timeoutMs?: number }) => Promise<RunResult>;

const DEFAULT_RUN_TIMEOUT_MS = 10_000;

function lookupId(database: "passwd" | "group", name: string): number | null {
  const id = Number(getent(database, name)?.[2]);
  return Number.isInteger(id) ? id : null;
}

export function resolveServiceAccount(
  user: string,
  group: string,
  source: AccountSource = { kind: "option" },
): ServiceAccount {
  const uid = lookupId("passwd", user);
  const gid = lookupId("group", group);
  const euid = process.geteuid?.() ?? -1;
  const canSwitch = euid === 0 && uid !== null && gid !== null && Bun.which("setpriv") !== null;
  const switchedBy = uid !== null && uid === euid ? "self" : canSwitch ? "setpriv" : "none";
  return { user, group, uid, gid, switchedBy, source };
}

/** Runs argv as the service account when doctor can become it, else as the current user. */
export function createRunAs(account: ServiceAccount): RunAs {
  const prefix = account.switchedBy === "setpriv"
    ? ["setpriv", `--reuid=${account.uid}`, `--regid=${account.gid}`, "--init-groups", "--"]
    : [];
  return (argv, opts = {}) => {
    const env = { PATH: BASE_PATH, LANG: "C.UTF-8", ...opts.env };
    return boundedRun([...prefix, ...argv], env, opts.timeoutMs ?? DEFAULT_RUN_TIMEOUT_MS);
  };
}

// `test EXPR` as the service account: true when the expression holds for it.
export async function holdsFor(runAs: RunAs, testArgs: string[]): Promise<boolean> {
  return (await runAs(["test", ...testArgs])).exitCode === 0;
}

// A command doctor runs, bounded in time. It runs in a process group of its own; when it exits, or
// at the deadline, the whole group is SIGKILLed, so nothing it started outlives the check. Output is
// read as it comes, and the result never waits on a pipe that a straggler holds open or on a process
// the kernel cannot kill (a driver call in state D): past the deadline it returns what was printed.

export interface RunResult {
  /** null when the process was killed, or did not end by the deadline. */
  exitCode: number | null;
  /** stderr then stdout, trimmed: for messages. */
  output: string;
  stdout: string;
  stderr: string;
  timedOut: boolean;
}

const EXIT_NOT_RUNNABLE = 127; // the shell's "could not execute", as setpriv reports it too
// Keeps the tail: the last lines say why a command failed.
const MAX_STREAM_CHARS = 64 * 1024;
// After the exit, how long the last of the output may take to drain from the pipes.
const DRAIN_MS = 1000;

async function boundedRun(argv: string[], env: Record<string, string>, timeoutMs: number): Promise<RunResult> {
  let proc: Bun.Subprocess<"ignore", "pipe", "pipe">;
  try {
    proc = Bun.spawn(argv, { env, stdin: "ignore", stdout: "pipe", stderr: "pipe", detached: true });
  } catch (error) {
    return result(EXIT_NOT_RUNNABLE, "", (error as Error).message, false);
  }
  const stdout = collect(proc.stdout);
  const stderr = collect(proc.stderr);
  const exited = await within(proc.exited, timeoutMs);
  if (!signalGroup(proc.pid, "SIGKILL") && !exited) proc.kill("SIGKILL");
  await within(Promise.all([stdout.done, stderr.done]), DRAIN_MS);
  const exitCode = exited && proc.signalCode === null ? proc.exitCode : null;
  return result(exitCode, stdout.text(), stderr.text(), !exited);
}

function result(exitCode: number | null, stdout: string, stderr: string, timedOut: boolean): RunResult {
  return { exitCode, output: (stderr + stdout).trim(), stdout, stderr, timedOut };
}

function collect(stream: ReadableStream<Uint8Array>): { done: Promise<void>; text: () => string } {
  const decoder = new TextDecoder();
  let text = "";
  const done = (async () => {
    for await (const chunk of stream) text = (text + decoder.decode(chunk, { stream: true })).slice(-MAX_STREAM_CHARS);
  })().catch(() => {});
  return { done, text: () => text };
}

// Whether `promise` settles within `ms`.
async function within(promise: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: Timer | undefined;
  const deadline = new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), ms)));
  const settled = await Promise.race([promise.then(() => true), deadline]);
  clearTimeout(timer);
  return settled;
}
