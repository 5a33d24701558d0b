import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { writeExecutable } from "./scratch-files.ts";

const FAKE_SYSTEMCTL = join(import.meta.dir, "fake-systemctl");

export interface FakeSystemd extends Disposable {
  systemctl: string;
  journalctl: string;
  /** Every systemctl call install.sh made, as its argument line. */
  calls(): string[];
  /** What `systemctl is-system-running` answers from now on: "offline" is a host where systemd does not run. */
  setSystemState(state: string): void;
  /** The pid the fake started for the unit, when one is running. */
  mainPid(): number | null;
}

/** systemctl and journalctl stand-ins for a scratch root; disposing stops whatever the fake started. */
export function fakeSystemd(root: string, dir: string): FakeSystemd {
  const state = join(dir, "fake-systemd");
  mkdirSync(state, { recursive: true });
  const env = `export FAKE_SYSTEMD_ROOT='${root}' FAKE_SYSTEMD_STATE='${state}'`;
  const systemctl = writeExecutable(join(dir, "systemctl"), `#!/bin/sh\n${env}\nexec bash '${FAKE_SYSTEMCTL}' "$@"\n`);
  const journalctl = writeExecutable(join(dir, "journalctl"), `#!/bin/sh\nexec tail -n 40 '${join(state, "journal.log")}'\n`);
  const read = (name: string) => (existsSync(join(state, name)) ? readFileSync(join(state, name), "utf8") : "");
  return {
    systemctl,
    journalctl,
    calls: () => read("calls").split("\n").filter(Boolean),
    setSystemState: (systemState) => writeFileSync(join(state, "system-state"), systemState),
    mainPid: () => {
      const pid = Number(read("main.pid").trim());
      return pid > 0 && isRunning(pid) ? pid : null;
    },
    [Symbol.dispose]: () => void Bun.spawnSync([systemctl, "stop"]),
  };
}

// A zombie is dead: only a process past its exit leaves an entry in state Z.
function isRunning(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return !stat.slice(stat.lastIndexOf(")") + 2).startsWith("Z");
  } catch {
    return false;
  }
}
