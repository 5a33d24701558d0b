import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fakeNvidiaSmi } from "./fake-nvidia-smi.ts";
import type { FakeSystemd } from "./fake-systemd.ts";
import { MAIN, REPO } from "./host-tree.ts";
import { freePort, makeDeviceNode, writeExecutable } from "./scratch-files.ts";

export const INSTALL_SH = join(REPO, "install.sh");
export const AS_ROOT = process.geteuid?.() === 0;

/** An account that exists on every Debian/RHEL machine, standing in for llmuser:arbotrain. */
export const STAND_IN = (() => {
  const id = (flag: string) => Bun.spawnSync(["id", flag, "nobody"]).stdout.toString().trim();
  return { user: "nobody", group: id("-gn"), uid: Number(id("-u")), gid: Number(id("-g")) };
})();

export interface ScratchRoot extends Disposable {
  /** The --root install.sh installs into; traversable by the stand-in account, as / is. */
  root: string;
  /** Beside the root: binaries to install, fakes, anything that is not part of the installed host. */
  tools: string;
}

export function makeScratchRoot(): ScratchRoot {
  const base = mkdtempSync(join(tmpdir(), "lora-worker-install-"));
  chmodSync(base, 0o755);
  const root = join(base, "root");
  const tools = join(base, "tools");
  Bun.spawnSync(["mkdir", "-p", root, tools]);
  return { root, tools, [Symbol.dispose]: () => rmSync(base, { recursive: true, force: true }) };
}

/** A stand-in for dist/lora-worker that runs this checkout's source; `variant` makes its bytes differ. */
export function sourceBinary(dir: string, variant: string): string {
  return writeExecutable(join(dir, `lora-worker-${variant}`), `#!/bin/sh\n# ${variant}\nexec '${process.execPath}' '${MAIN}' "$@"\n`);
}

/** A build that answers --version but whose `serve` dies at once: what the health gate exists to catch. */
export function brokenBinary(dir: string): string {
  return writeExecutable(
    join(dir, "lora-worker-broken"),
    `#!/bin/sh\nif [ "$1" = --version ]; then echo "lora-worker 9.9.9 (commit broken)"; exit 0; fi\necho "broken build: serve cannot start" >&2\nexit 1\n`,
  );
}

export interface InstallRun {
  code: number;
  stdout: string;
  stderr: string;
}

/** install.sh ARGS with nothing of this environment but PATH, and `env` on top (which may replace PATH). */
export async function runInstall(args: string[], env: Record<string, string> = {}): Promise<InstallRun> {
  const proc = Bun.spawn(["bash", INSTALL_SH, ...args], { stdout: "pipe", stderr: "pipe", env: { PATH: process.env.PATH ?? "/usr/bin:/bin", ...env } });
  const [code, stdout, stderr] = await Promise.all([proc.exited, new Response(proc.stdout).text(), new Response(proc.stderr).text()]);
  return { code, stdout, stderr };
}

export interface ManagedRoot {
  scratch: ScratchRoot;
  systemd: FakeSystemd;
  bin: string;
  healthz: string;
  args: string[];
}

// A scratch host that passes doctor (simulate mode, fake nvidia-smi, a uvm node) plus a stand-in service manager;
// `models` false names a model root elsewhere that nobody made (install.sh makes only its default one).
export function managedRoot(scratch: ScratchRoot, systemd: FakeSystemd, models = true): ManagedRoot {
  const { root, tools } = scratch;
  const port = freePort();
  mkdirSync(join(root, "etc/lora-worker"), { recursive: true });
  const modelRoot = join(root, models ? "worktank/models" : "srv/models");
  makeDeviceNode(join(root, "dev/nvidia-uvm"));
  const config = [
    `listen = "127.0.0.1:${port}"`,
    `state_dir = "${join(root, "var/lib/lora-worker")}"`,
    `handoff_root = "${join(root, "worktank/arbo/train")}"`,
    `model_roots = ["${modelRoot}"]`,
    `[trainer]\nmode = "simulate"`,
    `[gpu]\nnvidia_smi = "${fakeNvidiaSmi(tools).path}"`,
    `[auth]\ntoken_file = "${join(root, "etc/lora-worker/token")}"`,
    `read_token_file = "${join(root, "etc/lora-worker/read-token")}"`,
  ];
  writeFileSync(join(root, "etc/lora-worker/config.toml"), `${config.join("\n")}\n`);
  return {
    scratch,
    systemd,
    bin: join(root, "opt/lora-worker/lora-worker"),
    healthz: `http://127.0.0.1:${port}/healthz`,
    args: ["--root", root, "--systemctl", systemd.systemctl, "--journalctl", systemd.journalctl, "--user", STAND_IN.user, "--group", STAND_IN.group],
  };
}
