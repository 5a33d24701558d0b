import { beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { lstatSync, mkdirSync, readlinkSync, symlinkSync, unlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { tmpLink } from "../../src/job-dir/tmp-link.ts";
import { liveGroupMembers } from "../../src/os/terminate.ts";
import { ensureBinary } from "../support/binary.ts";
import { storedJob } from "../support/crash-state.ts";
import { fakeSlurm } from "../support/fake-slurm.ts";
import { makeHostTree, SIMULATE_TABLES, type HostTree } from "../support/host-tree.ts";
import { killJobAtEnd, processesMarkedWith } from "../support/job-processes.ts";
import { ENDED_STATUSES, untilEnded } from "../support/jobs.ts";
import { waitFor } from "../support/wait.ts";
import { startWorker } from "../support/worker-process.ts";

// Issue 41, items 7 and 8, through the compiled binary: what a crash leaves (the trainer's TMPDIR link in /dev/shm)
// goes at the next start, and every job the next start finds reaches an end, whatever its placement.json says.
setDefaultTimeout(90_000);

let binary: string;
beforeAll(() => {
  binary = ensureBinary();
}, 120_000);

const jobDir = (tree: HostTree, id: string) => join(tree.state, "jobs", id);
const placementFile = (tree: HostTree, id: string) => join(jobDir(tree, id), "placement.json");

// Where the link leads, or null when there is none.
function linkTarget(path: string): string | null {
  try {
    return lstatSync(path).isSymbolicLink() ? readlinkSync(path) : null;
  } catch {
    return null;
  }
}

// A worker trains a job and is killed with -9 once the trainer steps; with `run: "killed"` its shim and trainer too,
// with "orphaned" its shim alone.
async function crashMidRun(tree: HostTree, config: string, run: "alive" | "orphaned" | "killed"): Promise<string> {
  let id: string;
  {
    await using worker = await startWorker(config, { command: [binary] });
    id = (await worker.postTrain(tree.validRequest())).body.worker_job_id;
    await waitFor(async () => (await worker.json(`/train/${id}`)).body.step > 1, "training to start");
  }
  const row = storedJob(tree, id)!;
  if (run !== "alive") {
    process.kill(row.shim_pid!, "SIGKILL");
    await waitFor(() => liveGroupMembers(row.shim_pid!).length === 0, "the shim to die");
  }
  if (run === "killed") {
    process.kill(-row.pid!, "SIGKILL");
    await waitFor(() => processesMarkedWith(id).length === 0, "the job's processes to die");
  }
  return id;
}

describe("nothing left behind", () => {
  test("a job whose worker, shim and trainer were all killed ends worker_restarted, and its TMPDIR link goes", async () => {
    using tree = makeHostTree();
    const config = tree.writeConfig(SIMULATE_TABLES(0.05));
    const id = await crashMidRun(tree, config, "killed");
    // Contrast: nobody removed the link the shim made; before this start it stayed until retention.
    expect(linkTarget(tmpLink(jobDir(tree, id)))).toBe(join(jobDir(tree, id), "tmp"));
    await using restarted = await startWorker(config, { command: [binary] });
    expect((await restarted.json(`/train/${id}`)).body).toMatchObject({ status: "failed", error_code: "worker_restarted" });
    expect(linkTarget(tmpLink(jobDir(tree, id)))).toBeNull();
  });

  test("a run adopted after its shim was killed ends, and the worker removes the TMPDIR link the shim no longer can", async () => {
    using tree = makeHostTree();
    const config = tree.writeConfig(SIMULATE_TABLES(0.02));
    using _ = killJobAtEnd(() => id);
    let id: string | null = null;
    id = await crashMidRun(tree, config, "orphaned");
    // Contrast: the shim died without removing it. The restart adopts the trainer (its job active, the start-up
    // sweep leaves the link); the run's end is what removes it.
    expect(linkTarget(tmpLink(jobDir(tree, id)))).toBe(join(jobDir(tree, id), "tmp"));
    await using restarted = await startWorker(config, { command: [binary] });
    expect(restarted.output()).toContain('"msg":"re-adopting job after restart"');
    expect(ENDED_STATUSES).toContain((await untilEnded(restarted, id)).status);
    expect(linkTarget(tmpLink(jobDir(tree, id)))).toBeNull();
  });

  test("at start, links of this state dir's jobs that are not running go; another state dir's and a running one's stay", async () => {
    using tree = makeHostTree();
    const config = tree.writeConfig(SIMULATE_TABLES(0.03));
    // 12 s of run left: the restart finds it running, its link still needed.
    using _ = killJobAtEnd(() => running);
    let running: string | null = null;
    running = await crashMidRun(tree, config, "alive");
    // A job no record names (its directory pruned or never made), linked as its shim would have linked it.
    const gone = crypto.randomUUID();
    symlinkSync(join(jobDir(tree, gone), "tmp"), tmpLink(jobDir(tree, gone)));
    // Another worker's (another state dir), of the same user and the same form.
    const other = crypto.randomUUID();
    const otherTarget = join(tree.root, "other-state", "jobs", other, "tmp");
    symlinkSync(otherTarget, tmpLink(join(tree.root, "other-state", "jobs", other)));
    try {
      await using restarted = await startWorker(config, { command: [binary] });
      expect(linkTarget(tmpLink(jobDir(tree, gone)))).toBeNull();
      expect(linkTarget(tmpLink(join(tree.root, "other-state", "jobs", other)))).toBe(otherTarget);
      // The adopted run still needs its TMPDIR; it trains on to the end, and its shim then removes the link.
      expect(linkTarget(tmpLink(jobDir(tree, running)))).toBe(join(jobDir(tree, running), "tmp"));
      expect(await untilEnded(restarted, running)).toMatchObject({ status: "succeeded" });
      expect(linkTarget(tmpLink(jobDir(tree, running)))).toBeNull();
    } finally {
      unlinkSync(tmpLink(join(tree.root, "other-state", "jobs", other)));
    }
  });
});

describe("every job the next start finds reaches an end", () => {
  test("a placement.json naming Slurm on a host where Slurm does not answer ends the job, naming both, and frees the slot", async () => {
    using tree = makeHostTree();
    const noSlurm = join(tree.root, "no-slurm-here");
    mkdirSync(noSlurm);
    const config = tree.writeConfig(`${SIMULATE_TABLES(0.01)}[slurm]\nbin_dir = ${JSON.stringify(noSlurm)}\n`);
    const id = await crashMidRun(tree, config, "killed");
    writeFileSync(placementFile(tree, id), JSON.stringify({ backend: "slurm", state: { slurm_job_id: "4242" } }));
    await using restarted = await startWorker(config, { command: [binary] });
    const ended = (await restarted.json(`/train/${id}`)).body;
    expect(ended).toMatchObject({ status: "failed", error_code: "worker_restarted" });
    expect(ended.error).toContain("its placement.json says Slurm placed its run, but Slurm does not answer here");
    expect(ended.error).toContain("squeue in slurm.bin_dir cannot be run (ENOENT)");
    expect(ended.error).toContain(`this worker's trainer.backend is "local"`);
    expect(ended.error).toContain(`scancel the Slurm job named lora-worker-${id}`);
    const next = await restarted.postTrain(tree.validRequest({ output_name: "next" }));
    expect(next.status).toBe(200);
    expect(await untilEnded(restarted, next.body.worker_job_id)).toMatchObject({ status: "succeeded" });
  });

  test("contrast: where Slurm answers, a run its placement.json gives to Slurm is followed through Slurm, not ended at start", async () => {
    using tree = makeHostTree();
    using slurm = fakeSlurm(tree.root);
    const config = tree.writeConfig(`${SIMULATE_TABLES(0.05)}[slurm]\nbin_dir = ${JSON.stringify(slurm.binDir)}\npoll_seconds = 0.2\n`);
    const id = await crashMidRun(tree, config, "killed");
    writeFileSync(placementFile(tree, id), JSON.stringify({ backend: "slurm", state: null }));
    await using restarted = await startWorker(config, { command: [binary] });
    expect(restarted.output()).toMatch(/"msg":"re-adopting job after restart","job_id":"[^"]+","backend":"slurm"/);
    // Slurm knows no such job and the shim left no exit record: the run's end, as Slurm's backend judges it.
    const ended = await untilEnded(restarted, id);
    expect(ended).toMatchObject({ status: "failed", error_code: "worker_restarted" });
    expect(ended.error).toContain("the trainer ended while its shim was gone");
  });

  test("on the Slurm backend, Slurm commands that cannot run end the job at start, naming slurm.bin_dir; a train is refused, not a 500", async () => {
    using tree = makeHostTree();
    using slurm = fakeSlurm(tree.root);
    const onSlurm = (binDir: string) => tree.writeConfig(
      SIMULATE_TABLES(0.05).replace('mode = "simulate"', 'mode = "simulate"\nbackend = "slurm"') +
        `[slurm]\nbin_dir = ${JSON.stringify(binDir)}\npoll_seconds = 0.2\n` +
        '[[devices]]\nindex = 0\nname = "A6000"\nclass = "48gb"\ngres = "gpu:a6000:1"\n',
    );
    const id = await crashMidRun(tree, onSlurm(slurm.binDir), "alive");
    const noSlurm = join(tree.root, "no-slurm-here");
    mkdirSync(noSlurm);
    await using restarted = await startWorker(onSlurm(noSlurm), { command: [binary] });
    const ended = (await restarted.json(`/train/${id}`)).body;
    expect(ended).toMatchObject({ status: "failed", error_code: "worker_restarted" });
    expect(ended.error).toContain("Slurm does not answer here (squeue in slurm.bin_dir cannot be run (ENOENT)): ");
    expect(ended.error).toContain("check slurm.bin_dir (lora-worker doctor)");
    // What ran of it on this host (the fake cluster's node) is stopped.
    await waitFor(() => processesMarkedWith(id).length === 0, "its run to stop");
    const refused = await restarted.postTrain(tree.validRequest({ output_name: "next" }));
    expect(refused).toMatchObject({ status: 503, body: { reason: "slurm_refused" } });
    expect(refused.body.detail).toContain("sbatch in slurm.bin_dir cannot be run (ENOENT)");
  });

  test("a placement.json naming a backend this worker has none of ends the job and stops its run on this host", async () => {
    using tree = makeHostTree();
    const config = tree.writeConfig(SIMULATE_TABLES(0.05));
    using _ = killJobAtEnd(() => id);
    let id: string | null = null;
    id = await crashMidRun(tree, config, "alive");
    const { pid } = storedJob(tree, id)!;
    writeFileSync(placementFile(tree, id), JSON.stringify({ backend: "kubernetes", state: null }));
    await using restarted = await startWorker(config, { command: [binary] });
    const ended = (await restarted.json(`/train/${id}`)).body;
    expect(ended).toMatchObject({ status: "failed", error_code: "worker_restarted" });
    expect(ended.error).toBe(
      `the worker restarted while this job ran; its placement.json names the backend "kubernetes", which this worker ` +
        `has none of (trainer.backend = "local"): nothing could follow its run, so the restart ended it`,
    );
    await waitFor(() => processesMarkedWith(id!).length === 0 && liveGroupMembers(pid!).length === 0, "its run to stop");
    expect((await restarted.postTrain(tree.validRequest({ output_name: "next" }))).status).toBe(200);
  });

  test("contrast: a garbled placement.json leaves the run to the configured backend, which adopts a live one", async () => {
    using tree = makeHostTree();
    const config = tree.writeConfig(SIMULATE_TABLES(0.02));
    using _ = killJobAtEnd(() => id);
    let id: string | null = null;
    id = await crashMidRun(tree, config, "alive");
    writeFileSync(placementFile(tree, id), '{"backend": "loc');
    await using restarted = await startWorker(config, { command: [binary] });
    expect(restarted.output()).toContain('"msg":"a job\'s placement.json is unreadable; the configured backend judges it"');
    expect(await untilEnded(restarted, id)).toMatchObject({ status: "succeeded", step: 400 });
  });

  test("a garbled or missing placement.json with nothing running ends the job worker_restarted, saying which", async () => {
    using tree = makeHostTree();
    const config = tree.writeConfig(SIMULATE_TABLES(0.05));
    const garbled = await crashMidRun(tree, config, "killed");
    writeFileSync(placementFile(tree, garbled), "not json");
    const missing = await crashMidRun(tree, config, "killed");
    unlinkSync(placementFile(tree, missing));
    await using restarted = await startWorker(config, { command: [binary] });
    const usual = "the worker restarted while this job ran and its trainer was no longer running; its exit status " +
      "was not recorded";
    expect((await restarted.json(`/train/${garbled}`)).body).toMatchObject({
      status: "failed", error_code: "worker_restarted",
      error: `${usual} (placement.json is not JSON, so the configured backend (local) judged the run)`,
    });
    expect((await restarted.json(`/train/${missing}`)).body).toMatchObject({
      status: "failed", error_code: "worker_restarted", error: usual,
    });
  });
});
