import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { type SlurmCluster, slurmUnavailable, startSlurmCluster } from "../support/slurm-cluster.ts";
import { waitFor } from "../support/wait.ts";

const FIXTURES = join(import.meta.dir, "../fixtures", "slurm");
// A scancel takes slurmd's 5 s before its SIGKILL. (expireTimeLimit is proven through the worker, test/host/slurm.test.ts.)
setDefaultTimeout(60_000);

function submit(cluster: SlurmCluster, args: string[]): string {
  const result = cluster.run(["sbatch", "--parsable", `--chdir=${cluster.dir}`, ...args]);
  expect(result).toMatchObject({ exitCode: 0, stderr: "" });
  return result.stdout.trim().split(";")[0]!;
}

function fields(record: Record<string, string>, keys: string[]): Record<string, string | undefined> {
  return Object.fromEntries(keys.map((key) => [key, record[key]]));
}

const ended = (cluster: SlurmCluster, id: string) => !["PENDING", "RUNNING", "COMPLETING"].includes(cluster.jobState(id).JobState!);

// Pids whose command line holds the marker, as an operator would look for them.
function pgrep(pattern: string): number[] {
  const result = Bun.spawnSync(["pgrep", "-f", pattern]);
  return result.stdout.toString().split("\n").filter(Boolean).map(Number);
}

async function startStubbornTree(cluster: SlurmCluster): Promise<{ id: string; marker: string }> {
  const marker = `stubborn-${crypto.randomUUID()}`;
  const id = submit(cluster, ["-o", "/dev/null", join(FIXTURES, "stubborn-tree.sh"), marker]);
  await waitFor(() => pgrep(marker).length === 4, `job ${id}'s four processes`);
  return { id, marker };
}

describe.skipIf(slurmUnavailable() !== null)("a single-node Slurm cluster", () => {
  let cluster: SlurmCluster;
  let linuxproc: SlurmCluster; // the contrast: the same cluster without cgroup process tracking
  beforeAll(async () => {
    cluster = await startSlurmCluster({ gpus: 2 });
    linuxproc = await startSlurmCluster({ gpus: 0, proctrack: "linuxproc" });
  });
  afterAll(async () => {
    await cluster?.[Symbol.asyncDispose]();
    await linuxproc?.[Symbol.asyncDispose]();
  });

  test("two concurrent GPU jobs each see their own GPU and a third waits for Resources", async () => {
    const release = join(cluster.dir, "release-gpus");
    const job = (gres: string) => submit(cluster, [`--gres=${gres}`, "-o", join(cluster.dir, "%j.out"), join(FIXTURES, "gpu-env.sh"), release]);
    const output = (id: string) => {
      const file = join(cluster.dir, `${id}.out`);
      return existsSync(file) ? readFileSync(file, "utf8").trim() : "";
    };
    const first = job("gpu:1");
    const second = job("gpu:a6000:1");
    await waitFor(() => output(first) !== "" && output(second) !== "", "both jobs to print their GPUs");
    const seen = [output(first), output(second)].sort();
    expect(seen).toEqual(["0 0 0", "1 1 1"]);

    const third = job("gpu:1");
    await waitFor(() => cluster.jobState(third).Reason === "Resources", `job ${third} to pend for Resources`);
    expect(fields(cluster.jobState(third), ["JobState", "Reason"])).toEqual({ JobState: "PENDING", Reason: "Resources" });

    writeFileSync(release, "");
    await waitFor(() => [first, second, third].every((id) => ended(cluster, id)), "the three jobs to end");
    expect([first, second, third].map((id) => cluster.jobState(id).JobState)).toEqual(["COMPLETED", "COMPLETED", "COMPLETED"]);
  });

  test("a finished job keeps its state and exit code for scontrol and sacct -c", async () => {
    const ok = submit(cluster, ["-o", "/dev/null", "--wrap", "true"]);
    const three = submit(cluster, ["-o", "/dev/null", "--wrap", "exit 3"]);
    await waitFor(() => ended(cluster, ok) && ended(cluster, three), "both jobs to end");
    const keys = ["JobState", "Reason", "ExitCode"];
    expect(fields(cluster.jobState(ok), keys)).toEqual({ JobState: "COMPLETED", Reason: "None", ExitCode: "0:0" });
    expect(fields(cluster.jobState(three), keys)).toEqual({ JobState: "FAILED", Reason: "NonZeroExitCode", ExitCode: "3:0" });

    const sacct = cluster.run(["sacct", "-c", "-n", "-P", "-o", "jobid,state", "-j", `${ok},${three}`]);
    expect(sacct).toMatchObject({ exitCode: 0 });
    expect(sacct.stdout.trim().split("\n").sort()).toEqual([`${ok}|COMPLETED`, `${three}|FAILED`].sort());
  });

  test("scancel kills a job's whole tree, a SIGTERM-ignoring setsid escapee included", async () => {
    const { id, marker } = await startStubbornTree(cluster);
    expect(cluster.run(["scancel", id])).toMatchObject({ exitCode: 0 });
    await waitFor(() => pgrep(marker).length === 0, `every process of job ${id} to die`);
    await waitFor(() => ended(cluster, id), `job ${id} to end`);
    expect(fields(cluster.jobState(id), ["JobState", "ExitCode"])).toEqual({ JobState: "CANCELLED", ExitCode: "0:9" });
  });

  test("under proctrack/linuxproc instead, scancel leaves the double-forked escapee running", async () => {
    const { id, marker } = await startStubbornTree(linuxproc);
    using _ = { [Symbol.dispose]: () => pgrep(marker).forEach((pid) => process.kill(pid, "SIGKILL")) };
    expect(linuxproc.run(["scancel", id])).toMatchObject({ exitCode: 0 });
    await waitFor(() => ended(linuxproc, id), `job ${id} to end`);
    expect(pgrep(marker)).toEqual(pgrep(`${marker}-escapee`));
    expect(pgrep(`${marker}-escapee`)).toHaveLength(1);
  });
});
