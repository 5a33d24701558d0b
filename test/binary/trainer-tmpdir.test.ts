import { describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { ensureBinary } from "../support/binary.ts";
import { FAKE_NVIDIA_SMI, makeHostTree, type HostTree } from "../support/host-tree.ts";
import { writeExecutable } from "../support/scratch-files.ts";
import { waitFor } from "../support/wait.ts";
import { startWorker } from "../support/worker-process.ts";

const binary = ensureBinary();

// What torch's data-loader worker does first: Python's multiprocessing binds an AF_UNIX listener under TMPDIR.
const SOCKETS_LINE =
  "from multiprocessing import reduction; import os; reduction.DupFd(os.open('/dev/null', os.O_RDONLY))";

// A state dir far past the 29 characters a plain <state_dir>/jobs/<id>/tmp could afford.
function longStateTree(): HostTree {
  const tree = makeHostTree();
  tree.state = join(tree.root, "a-state-dir-whose-path-is-long".repeat(4), "lora-worker-state");
  mkdirSync(tree.state, { recursive: true });
  return tree;
}

// Real mode with `accelerate` replaced by a trainer that runs the line in the environment the worker gives it, shows
// where its TMPDIR leads, and leaves a file there.
function socketTrainerConfig(tree: HostTree): string {
  const trainer = writeExecutable(join(tree.root, "socket-trainer.sh"), `#!/bin/sh
echo "TMPDIR=$TMPDIR -> $(readlink "$TMPDIR")"
python3 -c "${SOCKETS_LINE}; print('multiprocessing sockets: ok')" 2>&1
echo scratch > "$TMPDIR/scratch.txt"
exit 1
`);
  const sdScripts = join(tree.root, "sd-scripts");
  mkdirSync(sdScripts);
  writeExecutable(join(sdScripts, "sdxl_train_network.py"), "");
  const trainerTable = `[trainer]\nmode = "real"\naccelerate = ${JSON.stringify(trainer)}\nsd_scripts_dir = ${JSON.stringify(sdScripts)}\n`;
  return tree.writeConfig(`${trainerTable}[gpu]\nnvidia_smi = ${JSON.stringify(FAKE_NVIDIA_SMI)}\n`);
}

function python(tmpdir: string) {
  const run = Bun.spawnSync(["python3", "-c", SOCKETS_LINE], { env: { PATH: "/usr/local/bin:/usr/bin:/bin", TMPDIR: tmpdir }, stderr: "pipe" });
  return { exitCode: run.exitCode, stderr: run.stderr.toString() };
}

describe("the trainer's TMPDIR with a long state dir", () => {
  test("Python's multiprocessing binds its sockets, the files stay in the job's own folder and the link goes with the run", async () => {
    using tree = longStateTree();
    await using worker = await startWorker(socketTrainerConfig(tree), { command: [binary] });
    const posted = await worker.postTrain(tree.validRequest());
    expect(posted.status).toBe(200);
    const id: string = posted.body.worker_job_id;
    await waitFor(async () => (await worker.json(`/train/${id}`)).body.status === "failed", "the trainer's job to end", 30_000);

    const folder = join(tree.state, "jobs", id, "tmp");
    const link = `/dev/shm/lora-worker-${id}`;
    const log = await (await worker.request(`/train/${id}/log`)).text();
    expect(log).toContain(`TMPDIR=${link} -> ${folder}\n`);
    expect(log).toContain("multiprocessing sockets: ok\n");
    expect(readFileSync(join(folder, "scratch.txt"), "utf8")).toBe("scratch\n");
    expect(existsSync(link)).toBe(false);

    // The contrast: the job's folder itself as TMPDIR, as the worker gave it before, is too long for a socket.
    expect(folder.length + 32).toBeGreaterThan(107);
    const direct = python(folder);
    expect(direct.exitCode).not.toBe(0);
    expect(direct.stderr).toContain("OSError: AF_UNIX path too long");
  }, 60_000);
});
