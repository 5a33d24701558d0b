import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";

/** Where install.sh puts the unit; its User= and Group= are who the deployed worker runs as. */
export const DEFAULT_UNIT_PATH = "/etc/systemd/system/lora-worker.service";

/** Whose account doctor checks as, and why that one: named with --user, by the installed unit, or the user running doctor. */
export type AccountSource = { kind: "option" } | { kind: "unit"; path: string } | { kind: "running"; unitPath: string };

export interface AccountNames {
  user: string;
  group: string;
  source: AccountSource;
}

/** --user/--group first, then the installed unit's User=/Group=, then the user running doctor; a missing group is the user's own. */
export function chooseAccountNames(options: { user?: string; group?: string; unitPath: string }): AccountNames {
  const unit = readUnitAccount(options.unitPath);
  const source: AccountSource = options.user !== undefined ? { kind: "option" } : unit ? { kind: "unit", path: options.unitPath } : { kind: "running", unitPath: options.unitPath };
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

function getent(database: "passwd" | "group", key: string): string[] | null {
  const res = Bun.spawnSync(["getent", database, key], { stdout: "pipe", stderr: "ignore" });
  return res.exitCode === 0 ? res.stdout.toString().trim().split(":") : null;
}
