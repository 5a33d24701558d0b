import { describe, expect, test } from "bun:test";
import { chmodSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { jsonText } from "../../src/cli/client/format.ts";
import { createTerminal } from "../../src/cli/client/terminal.ts";
import { ensureBinary } from "../support/binary.ts";
import { runCli } from "../support/cli-process.ts";
import { makeHostTree, type HostTree } from "../support/host-tree.ts";
import { waitFor } from "../support/wait.ts";
import { startWorker, type WorkerProcess } from "../support/worker-process.ts";
import { RTX_3090_ROW, RTX_3090_UUID, writtenNvidiaSmi } from "../support/written-nvidia-smi.ts";

// What a hostile trainer or process name carries: clear screen, set the window title (OSC ended by BEL), and C1 CSI.
const CLEAR = "\x1b[2J";
const TITLE = "\x1b]0;pwned\x07";
const C1_CSI = "\u009b31m";
const HOSTILE = `clear${CLEAR}title${TITLE}csi${C1_CSI}end`;
const SHOWN = "clear^[[2Jtitle^[]0;pwned^GcsiM-^[31mend";
const RAW_CONTROL = /[\x00-\x08\x0b-\x0c\x0e-\x1f\x7f-\x9f]/; // all but tab, newline and the pty's own \r

describe("the one filter every client command's output goes through", () => {
  function captured(stdoutIsTTY: boolean, stderrIsTTY: boolean) {
    const seen = { stdout: "", stderr: "" };
    const out = createTerminal({ stdout: (t) => void (seen.stdout += t), stderr: (t) => void (seen.stderr += t) }, { stdoutIsTTY, stderrIsTTY, columns: 80 });
    return { out, seen };
  }

  test("on a terminal, written and error text show their control characters, while redraw keeps its own", () => {
    const { out, seen } = captured(true, true);
    out.write(`${HOSTILE}\n\tindented\n`);
    out.redraw(HOSTILE);
    out.error(`lora-worker gpu: ${HOSTILE}\n`);
    expect(seen).toEqual({ stdout: `${SHOWN}\n\tindented\n\r\x1b[2K${SHOWN}\n`, stderr: `lora-worker gpu: ${SHOWN}\n` });
  });

  test("into pipes the same text passes unchanged (the contrast), each stream judged on its own", () => {
    const { out, seen } = captured(false, true);
    out.write(`${HOSTILE}\n`);
    out.error(`${HOSTILE}\n`);
    expect(seen).toEqual({ stdout: `${HOSTILE}\n`, stderr: `${SHOWN}\n` });
  });

  test("--json text escapes DEL and C1 too, so it is the same JSON value and nothing for the filter to change", () => {
    const value = { name: `${HOSTILE}\x7f` };
    const text = jsonText(value);
    expect(JSON.parse(text)).toEqual(value);
    expect(RAW_CONTROL.test(text)).toBe(false);
    expect(RAW_CONTROL.test(JSON.stringify(value))).toBe(true);
  });
});

const binary = ensureBinary();
const at = (worker: WorkerProcess) => ({ LORA_WORKER_URL: worker.url });

/** The binary's client command on a pseudo-terminal, as an operator's shell runs it. */
function onTerminal(worker: WorkerProcess, args: string[]): { exitCode: number; screen: string } {
  const run = Bun.spawnSync(["script", "-qec", [binary, ...args].join(" "), "/dev/null"], { env: { PATH: process.env.PATH ?? "/usr/bin:/bin", ...at(worker) } });
  return { exitCode: run.exitCode, screen: run.stdout.toString() };
}

// Real mode with `accelerate` replaced by a trainer that prints the hostile line and fails, and an nvidia-smi whose
// process list holds a hostile name.
function hostileWorkerConfig(tree: HostTree): string {
  const trainer = join(tree.root, "hostile-trainer.sh");
  writeFileSync(trainer, `#!/bin/sh\nprintf 'loading\\n%s\\n' '${HOSTILE}'\nexit 1\n`);
  chmodSync(trainer, 0o755);
  const sdScripts = join(tree.root, "sd-scripts");
  mkdirSync(sdScripts);
  writeFileSync(join(sdScripts, "sdxl_train_network.py"), "");
  const nvidiaSmi = writtenNvidiaSmi(tree.root, { "query-gpu.csv": `${RTX_3090_ROW}\n`, "compute-apps.csv": `${RTX_3090_UUID}, 4242, ${HOSTILE}, 100\n` });
  const tables = { trainer: { mode: "real", accelerate: trainer, sd_scripts_dir: sdScripts }, gpu: { nvidia_smi: nvidiaSmi } };
  const toml = Object.entries(tables).map(([table, keys]) => `[${table}]\n${Object.entries(keys).map(([k, v]) => `${k} = ${JSON.stringify(v)}`).join("\n")}\n`);
  return tree.writeConfig(toml.join(""));
}

describe("foreign text from the binary's client commands on a terminal", () => {
  test("logs, status and gpu show a hostile log line and process name as ^[ and ^G, where a pipe and --json keep the raw bytes", async () => {
    using tree = makeHostTree();
    await using worker = await startWorker(hostileWorkerConfig(tree), { command: [binary] });
    const posted = await worker.postTrain(tree.validRequest());
    expect(posted.status).toBe(200);
    const id: string = posted.body.worker_job_id;
    await waitFor(async () => (await worker.json(`/train/${id}`)).body.status === "failed", "the hostile trainer's job to fail");

    const screens = { logs: onTerminal(worker, ["logs", id]), status: onTerminal(worker, ["status", id]), gpu: onTerminal(worker, ["gpu"]) };
    expect(Object.values(screens).map((s) => s.exitCode)).toEqual([0, 1, 0]);
    for (const { screen } of Object.values(screens)) {
      expect(RAW_CONTROL.test(screen)).toBe(false);
      expect(screen).toContain(SHOWN);
    }

    const [logs, status, gpu] = await Promise.all([
      runCli(binary, ["logs", id], at(worker)),
      runCli(binary, ["status", id, "--json"], at(worker)),
      runCli(binary, ["gpu", "--json"], at(worker)),
    ]);
    expect(logs.stdout).toContain(`\n${HOSTILE}\n`);
    expect(JSON.parse(status.stdout).error).toContain(`\n${HOSTILE}`);
    expect(JSON.parse(gpu.stdout).devices[0].processes).toMatchObject([{ pid: 4242, name: HOSTILE, used_mib: 100 }]);
  }, 60_000);
});
