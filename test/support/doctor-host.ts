import { chmodSync, chownSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { CHECKPOINT_KEYS, writeCheckpoint } from "./checkpoints.ts";
import { fakeNvidiaSmi } from "./fake-nvidia-smi.ts";
import { FACE_PYTHON, likenessTable } from "./face-scorer.ts";
import { writeFakePython } from "./fake-python.ts";
import { MAIN } from "./host-tree.ts";
import { STAND_IN } from "./install-root.ts";
import { writeStandInSdScripts } from "./stand-in-sd-scripts.ts";
import { writeTokenizers } from "./tokenizers.ts";
import { freePort, makeDeviceNode, writeExecutable } from "./scratch-files.ts";

/** A GPU host in a temp dir that passes every doctor check, for the stand-in service account (nobody). */
export interface DoctorHost extends Disposable {
  dir: string;
  handoff: string;
  models: string;
  /** smoke.base_model: an SDXL checkpoint in the model root. */
  model: string;
  state: string;
  venv: string;
  accelerate: string;
  /** The venv's interpreter: answers doctor's probe as torch on both cards and bitsandbytes would. */
  python: string;
  /** trainer.tokenizer_dir (its default, in the state dir), holding both tokenizers. */
  tokenizers: string;
  trainScript: string;
  uvm: string;
  token: string;
  port: number;
  /** Rewrites the config; `extra` is appended (tables, overrides). */
  writeConfig(opts?: { mode?: "real" | "simulate"; scenario?: string; extra?: string }): string;
  doctor(args?: string[]): Promise<{ code: number; lines: string[] }>;
}

/**
 * `faceScorer: true` names the tests' venv as [likeness] python, for the test of a whole host; else a python that is
 * not there (a WARN, at once), for the tests of other checks: the real scorer's check loads dlib's models, most of a
 * doctor run's time, and waits at nice 10 for a loaded host's CPU.
 */
export function makeDoctorHost({ faceScorer = false } = {}): DoctorHost {
  const dir = mkdtempSync(join(tmpdir(), "lora-worker-doctor-"));
  chmodSync(dir, 0o755);
  const at = (...parts: string[]) => join(dir, ...parts);
  const { uid, gid } = STAND_IN;
  const handoff = mkdir(at("handoff"), 0o2770, 0, gid);
  const models = mkdir(at("models"), 0o755);
  const model = writeCheckpoint(at("models/sd_xl_base_1.0.safetensors"), CHECKPOINT_KEYS.sdxl);
  const state = mkdir(at("state"), 0o700, uid, gid);
  const venv = mkdir(at("venv"), 0o755);
  mkdir(at("venv/bin"), 0o755);
  const accelerate = writeExecutable(at("venv/bin/accelerate"), "#!/bin/sh\necho 'usage: accelerate <command> [<args>]'\n");
  const python = writeFakePython(at("venv/bin/python"));
  const tokenizers = writeTokenizers(at("state/tokenizers"));
  mkdir(at("sd-scripts"), 0o755);
  writeStandInSdScripts(at("sd-scripts"));
  const trainScript = at("sd-scripts/sdxl_train_network.py");
  const uvm = makeDeviceNode(at("dev/nvidia-uvm"));
  const token = at("token");
  writeFileSync(token, `${"ab".repeat(32)}\n`);
  chownSync(token, 0, gid);
  chmodSync(token, 0o640);
  const port = freePort();
  const configPath = at("config.toml");

  const host: DoctorHost = {
    dir, handoff, models, model, state, venv, accelerate, python, tokenizers, trainScript, uvm, token, port,
    writeConfig({ mode = "real", scenario, extra = "" } = {}) {
      const smi = fakeNvidiaSmi(dir, scenario).path;
      writeFileSync(configPath, [
        `listen = "127.0.0.1:${port}"`,
        `state_dir = "${state}"`,
        `handoff_root = "${handoff}"`,
        `model_roots = ["${models}"]`,
        `[trainer]\nmode = "${mode}"\naccelerate = "${accelerate}"\nsd_scripts_dir = "${at("sd-scripts")}"`,
        `[smoke]\nbase_model = "${model}"`,
        `[gpu]\nnvidia_smi = "${smi}"`,
        // Never the host's /etc/lora-worker/read-token: this one is not written.
        `[auth]\ntoken_file = "${token}"\nread_token_file = "${at("read-token")}"`,
        // The stand-in venv has no dlib: the face scorer's Python is the tests' venv.
        likenessTable(faceScorer ? FACE_PYTHON : at("no-face-scorer/python")),
        extra,
      ].join("\n"));
      return configPath;
    },
    doctor: (args = []) => runDoctor(["--config", configPath, "--user", STAND_IN.user, "--group", STAND_IN.group, "--dev-dir", at("dev"), ...args]),
    [Symbol.dispose]: () => rmSync(dir, { recursive: true, force: true }),
  };
  host.writeConfig();
  return host;
}

/** `lora-worker doctor ARGS` from source, with nothing of this environment but PATH. */
export async function runDoctor(args: string[]): Promise<{ code: number; lines: string[] }> {
  const proc = Bun.spawn([process.execPath, MAIN, "doctor", ...args], { stdout: "pipe", stderr: "pipe", env: { PATH: process.env.PATH ?? "/usr/bin:/bin" } });
  const [code, out] = await Promise.all([proc.exited, new Response(proc.stdout).text()]);
  return { code, lines: out.trimEnd().split("\n") };
}

function mkdir(path: string, mode: number, uid = 0, gid = 0): string {
  mkdirSync(path, { recursive: true });
  chownSync(path, uid, gid);
  chmodSync(path, mode);
  return path;
}
