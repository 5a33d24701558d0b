import { describe, expect, test } from "bun:test";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { ensureBinary } from "../support/binary.ts";
import { makeHostTree, SIMULATE_TABLES } from "../support/host-tree.ts";
import { startWorker } from "../support/worker-process.ts";

const binary = ensureBinary();

describe("serve's stop path", () => {
  test("a SIGTERM sent the moment the worker says it listens is logged, exits 0 and releases the state dir's lock", async () => {
    using tree = makeHostTree();
    await using worker = await startWorker(tree.writeConfig(SIMULATE_TABLES(0.01)), { command: [binary] });
    expect(existsSync(join(tree.state, "lock"))).toBe(true);
    worker.proc.kill("SIGTERM");
    await worker.proc.exited;
    expect({ exitCode: worker.proc.exitCode, signalCode: worker.proc.signalCode }).toEqual({ exitCode: 0, signalCode: null });
    expect(worker.output()).toContain('"msg":"stopping","signal":"SIGTERM"');
    expect(existsSync(join(tree.state, "lock"))).toBe(false);
  });

  test("contrast: a worker killed without its stop path leaves the lock behind", async () => {
    using tree = makeHostTree();
    await using worker = await startWorker(tree.writeConfig(SIMULATE_TABLES(0.01)), { command: [binary] });
    worker.proc.kill("SIGKILL");
    await worker.proc.exited;
    expect(worker.proc.signalCode).toBe("SIGKILL");
    expect(existsSync(join(tree.state, "lock"))).toBe(true);
  });
});
