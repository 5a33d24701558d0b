import { describe, expect, test } from "bun:test";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { TOKEN_A, TOKEN_B, writeTokens } from "../support/auth-setup.ts";
import { ensureBinary } from "../support/binary.ts";
import { deadUrl, runCli, spawnCli } from "../support/cli-process.ts";
import { fakeNvidiaSmi } from "../support/fake-nvidia-smi.ts";
import { FAKE_NVIDIA_SMI, makeHostTree, SIMULATE_TABLES, type HostTree } from "../support/host-tree.ts";
import { startWorker, type WorkerProcess } from "../support/worker-process.ts";
import { openJobStore } from "../../src/store/job-store.ts";

const binary = ensureBinary();
const UNKNOWN_JOB = "3f1c2a4e-0000-4000-8000-000000000000";
const PROGRESS_LINE = /^(starting|training) phase=\w+ step=\d+\/(\d+|\?) loss=\S+ eta=\S+$/;

const at = (worker: WorkerProcess) => ({ LORA_WORKER_URL: worker.url });
const cli = (worker: WorkerProcess, ...args: string[]) => runCli(binary, args, at(worker));
const withSimulate = (keys: string) => SIMULATE_TABLES(0.01).replace("[simulate]\n", `[simulate]\n${keys}\n`);

function requestFile(tree: HostTree, overrides: Record<string, unknown> = {}): string {
  const path = join(tree.root, `request-${Object.values(overrides).join("-") || "valid"}.json`);
  writeFileSync(path, JSON.stringify(tree.validRequest(overrides)));
  return path;
}

const submittedId = (stdout: string) => /^job (\S+) submitted$/m.exec(stdout)?.[1];

describe("the operator CLI against a worker running simulated jobs", () => {
  test("submit --follow prints one plain line per change and exits 0 on success; status, jobs and logs then describe that job", async () => {
    using tree = makeHostTree();
    await using worker = await startWorker(tree.writeConfig(SIMULATE_TABLES(0.01)), { command: [binary] });
    const run = await cli(worker, "submit", requestFile(tree), "--follow");
    expect({ exitCode: run.exitCode, stderr: run.stderr }).toEqual({ exitCode: 0, stderr: "" });
    const lines = run.stdout.trimEnd().split("\n");
    const id = submittedId(run.stdout)!;
    const progress = lines.slice(1, -2);
    expect(progress.every((l) => PROGRESS_LINE.test(l))).toBe(true);
    expect(progress.filter((l) => /step=[1-9]\d*\/400/.test(l)).length).toBeGreaterThanOrEqual(3);
    expect(progress.some((l, i) => l === progress[i - 1])).toBe(false);
    expect(lines.at(-2)).toMatch(/^succeeded phase=done step=400\/400 loss=\d\.\d{4} eta=-$/);
    expect(lines.at(-1)).toMatch(new RegExp(`^succeeded after \\d+s: ${tree.handoff}/job1/out/mylora\\.safetensors \\(\\d+\\.\\d KiB, sha256 [0-9a-f]{64}\\)$`));
    expect(run.stdout).not.toContain("\r");

    const [status, none, jobs, asJson, noneFailed, logs] = await Promise.all([
      cli(worker, "status", id),
      cli(worker, "status"),
      cli(worker, "jobs"),
      cli(worker, "jobs", "--json", "--status", "succeeded"),
      cli(worker, "jobs", "--status", "failed"),
      cli(worker, "logs", id, "--lines", "3"),
    ]);
    expect(status.exitCode).toBe(0);
    expect(status.stdout).toContain(`job      ${id}\nstatus   succeeded, phase done (simulated trainer)\nprogress 400/400 steps`);
    expect(none).toEqual({ exitCode: 0, stdout: "no job is active\n", stderr: "" });
    expect(jobs.exitCode).toBe(0);
    // Into a pipe too, the whole rows under their header, as gpu prints its own; --json has none.
    expect(jobs.stdout).toMatch(new RegExp(`^ID +STATUS +STEPS +LOSS +TIER@DEVICE +CREATED +OUTPUT\\n${id}  succeeded  400/400  \\d\\.\\d{4}  fast@0 .* mylora\\n$`));
    expect(asJson.stdout.trimEnd().split("\n").map((l) => JSON.parse(l))).toMatchObject([{ worker_job_id: id, status: "succeeded", step: 400 }]);
    expect(noneFailed.stdout).toBe("no failed jobs\n");
    expect(logs.exitCode).toBe(0);
    expect(logs.stdout.trimEnd().split("\n")).toHaveLength(3);
    expect(logs.stdout).toContain("model saved.");
  }, 60_000);

  test("on a terminal, submit --follow redraws one progress bar in place with \\r instead of printing plain lines", async () => {
    using tree = makeHostTree();
    await using worker = await startWorker(tree.writeConfig(SIMULATE_TABLES(0.01)), { command: [binary] });
    const command = `${binary} submit ${requestFile(tree, { output_name: "tty" })} --follow`;
    const onTerminal = Bun.spawnSync(["script", "-qec", command, "/dev/null"], { env: { PATH: process.env.PATH ?? "/usr/bin:/bin", ...at(worker) } });
    const screen = onTerminal.stdout.toString();
    expect(onTerminal.exitCode).toBe(0);
    const redraws = screen.split("\r\x1b[2K").slice(1);
    expect(redraws.length).toBeGreaterThanOrEqual(3);
    expect(redraws.some((r) => /^training +█*[▏▎▍▌▋▊▉]?░+ +\d+\/400 +\d+% +loss \d\.\d{4} +ETA \S+$/.test(r))).toBe(true);
    expect(redraws.at(-1)).toMatch(/^succeeded +█{10,40} +400\/400 +100% +loss \d\.\d{4} +ETA -\r\nsucceeded after \d+s: .*tty\.safetensors/);
    expect(screen).not.toMatch(PROGRESS_LINE);
  }, 60_000);

  test("a job the trainer fails makes submit --follow exit 1 with the error code, where status of it exits 1 too", async () => {
    using tree = makeHostTree();
    await using worker = await startWorker(tree.writeConfig(withSimulate('fail = "exit@3:1"')), { command: [binary] });
    const run = await cli(worker, "submit", requestFile(tree), "--follow");
    expect(run.exitCode).toBe(1);
    expect(run.stdout).toMatch(/^failed phase=\w+ step=\d+\/400 loss=\S+ eta=-\nfailed after \d+s: trainer_crashed \(exit code 1\)\n/m);
    const status = await cli(worker, "status", submittedId(run.stdout)!, "--json");
    expect(status.exitCode).toBe(1);
    expect(JSON.parse(status.stdout)).toMatchObject({ status: "failed", error_code: "trainer_crashed", exit_code: 1 });
  }, 60_000);

  test("cancel stops a hung job and exits 0; the job's --json follower and logs -f then exit 3", async () => {
    using tree = makeHostTree();
    await using worker = await startWorker(tree.writeConfig(withSimulate('fail = "hang@5"')), { command: [binary] });
    await using follower = spawnCli(binary, ["submit", requestFile(tree), "--follow", "--json"], at(worker));
    const id = (await follower.waitForOutput(/"worker_job_id":"([^"]+)","status":"training","phase":"training","step":[1-9],/, "a step before the trainer hangs at step 5"))[1]!;
    const active = await cli(worker, "status", "--json");
    expect(JSON.parse(active.stdout)).toMatchObject({ worker_job_id: id, status: "training", phase: "training" });
    await using logs = spawnCli(binary, ["logs", id, "-f"], at(worker));
    await logs.waitForOutput(/^steps: +\d%\|.*\| [1-4]\/400 /m, "the log's bar before step 5");

    const cancel = await cli(worker, "cancel", id);
    expect(cancel).toEqual({ exitCode: 0, stdout: expect.stringMatching(new RegExp(`^job ${id} cancelled after \\d+s`)), stderr: "" });
    const followed = await follower.done();
    expect(followed.exitCode).toBe(3);
    const records = followed.stdout.trimEnd().split("\n").map((l) => JSON.parse(l));
    expect(records[0]).toMatchObject({ worker_job_id: id, status: "starting" });
    expect(records.at(-1)).toMatchObject({ worker_job_id: id, status: "cancelled", phase: "training", eta_s: null });
    expect((await logs.done()).exitCode).toBe(3);
    const again = await cli(worker, "cancel", id, "--json");
    expect(again.exitCode).toBe(0);
    expect(JSON.parse(again.stdout)).toMatchObject({ worker_job_id: id, status: "cancelled" });
  }, 60_000);

  test("gpu draws a VRAM bar per device and marks the co-tenant, which is absent on idle cards", async () => {
    using tree = makeHostTree();
    const tts = fakeNvidiaSmi(tree.root, "two-gpus-tts").path;
    await using worker = await startWorker(tree.writeConfig(SIMULATE_TABLES(0.01).replace(JSON.stringify(FAKE_NVIDIA_SMI), JSON.stringify(tts))), { command: [binary] });
    const gpu = await cli(worker, "gpu");
    expect(gpu.exitCode).toBe(0);
    const [header, card0, tenant, card1, summary] = gpu.stdout.trimEnd().split("\n");
    expect(header).toMatch(/^GPU +NAME +VRAM USED +USED \/ TOTAL +FREE +UTIL$/);
    expect(card0).toMatch(/^0 +NVIDIA GeForce RTX 3090 +██▌░{17} +3012 \/  24576 MiB +21232 MiB +7%$/);
    expect(tenant).toMatch(/^ +pid 48213 +3000 MiB +python3 \/opt\/tts\/server\.py +\[co-tenant\]$/);
    expect(card1).toMatch(/^1 +NVIDIA RTX A6000 +░{20} +4 \/  49140 MiB +48669 MiB +0%$/);
    expect(summary).toBe("co-tenants: python3 /opt/tts/server.py (pid 48213, 3000 MiB) on GPU 0 — tts_on_3090: training on the 24 GB card competes with it");
    expect(JSON.parse((await cli(worker, "gpu", "--json")).stdout)).toMatchObject({ tts_on_3090: true, cotenants: [{ pid: 48213 }] });

    using idleTree = makeHostTree();
    await using idle = await startWorker(idleTree.writeConfig(SIMULATE_TABLES(0.01)), { command: [binary] });
    expect((await cli(idle, "gpu")).stdout).toEndWith("co-tenants: none\n");
  }, 60_000);

  test("a job is named by the start of its id when exactly one id starts so; more than one is a usage error, none is 6", async () => {
    using tree = makeHostTree();
    // Two ended jobs whose ids share their first 35 characters, recorded as a worker would.
    const store = openJobStore(join(tree.state, "jobs.db"));
    for (const last of ["1", "2"]) {
      const id = `abcdef01-0000-4000-8000-00000000000${last}`;
      store.insertIfIdle({ id, request: tree.validRequest({ output_name: `twin${last}` }), requestHash: id, idempotencyKey: null, admissionWarning: null, simulated: true, logPath: join(tree.state, "jobs", id, "train.log"), now: new Date().toISOString(), phase: "preparing", totalSteps: 400, dataset: null });
      store.finish(id, { status: "cancelled", exit_code: null, signal: null, forced_kill: false, error: null, error_code: null, lora_path: null, lora_sha256: null, lora_bytes: null }, new Date().toISOString());
    }
    store.close();
    await using worker = await startWorker(tree.writeConfig(SIMULATE_TABLES(0.01)), { command: [binary] });
    const [ambiguous, longer, unknown, whole] = await Promise.all([
      cli(worker, "status", "abcdef01"),
      cli(worker, "status", "abcdef01-0000-4000-8000-000000000002", "--json"),
      cli(worker, "cancel", "abcdef02"),
      cli(worker, "status", "abcdef01-0000-4000-8000-000000000001", "--json"),
    ]);
    expect(ambiguous).toMatchObject({ exitCode: 2, stdout: "" });
    expect(ambiguous.stderr).toStartWith("lora-worker status: more than one job id starts with abcdef01 (abcdef01-0000-4000-8000-000000000002, abcdef01-0000-4000-8000-000000000001, …): give more of it\n");
    expect(JSON.parse(longer.stdout)).toMatchObject({ worker_job_id: "abcdef01-0000-4000-8000-000000000002", request: { output_name: "twin2" } });
    expect(unknown).toEqual({ exitCode: 6, stdout: "", stderr: "lora-worker cancel: no such job: no job id starts with abcdef02\n" });
    expect(JSON.parse(whole.stdout)).toMatchObject({ worker_job_id: "abcdef01-0000-4000-8000-000000000001" });
  });

  test("exit codes: 5 with the worker's 422 detail, 6 for an unknown job, 4 when nothing listens, 2 for a usage error", async () => {
    using tree = makeHostTree();
    await using worker = await startWorker(tree.writeConfig(SIMULATE_TABLES(0.01)), { command: [binary] });
    const refused = await cli(worker, "submit", requestFile(tree, { repeats: 0, tier: "huge" }));
    expect(refused.exitCode).toBe(5);
    expect(refused.stderr).toStartWith("lora-worker submit: the worker answered 422:\n  body.repeats: ");
    expect(refused.stderr).toContain("\n  body.tier: ");
    expect(refused.stdout).toBe("");

    const unknown = [["status", UNKNOWN_JOB], ["logs", UNKNOWN_JOB], ["cancel", UNKNOWN_JOB], ["logs", "not-a-job", "-f"]];
    const answers = await Promise.all(unknown.map(async (args) => ({ args, ...(await cli(worker, ...args)) })));
    expect(answers).toEqual(unknown.map((args) => ({ args, exitCode: 6, stdout: "", stderr: `lora-worker ${args[0]}: no such job: ${args[1]}\n` })));

    const dead = deadUrl();
    const unreachable = await runCli(binary, ["jobs", "--url", dead]);
    expect(unreachable.exitCode).toBe(4);
    expect(unreachable.stderr).toBe(`lora-worker jobs: cannot reach the worker at ${dead} (ECONNREFUSED)\n`);

    const usage = await Promise.all([
      cli(worker, "submit"),
      cli(worker, "submit", join(tree.root, "missing.json")),
      cli(worker, "jobs", "--limit", "0"),
      cli(worker, "logs", UNKNOWN_JOB, "--follw"),
      runCli(binary, ["status", "--config", join(tree.root, "absent.toml")]),
    ]);
    expect(usage.map((r) => r.exitCode)).toEqual([2, 2, 2, 2, 2]);
    expect(usage.map((r) => r.stderr.split("\n")[0])).toEqual([
      "lora-worker submit: submit takes exactly one REQUEST.json",
      `lora-worker submit: cannot read ${join(tree.root, "missing.json")} (ENOENT)`,
      'lora-worker jobs: --limit must be a positive integer, got "0"',
      "lora-worker logs: unknown option --follw (did you mean --follow?)",
      `lora-worker status: cannot use the worker's config ${join(tree.root, "absent.toml")}:`,
    ]);
    const help = await runCli(binary, ["submit", "--help"]);
    expect(help.exitCode).toBe(0);
    expect(help.stdout).toContain("Exit codes:\n  0  succeeded");
    expect(help.stdout).toContain("  6  no such job (404)\n");
  }, 60_000);

  test("--config reaches the worker its listen names with the first token of its token file; env and flags win over it", async () => {
    using tree = makeHostTree();
    const tokenFile = writeTokens(join(tree.root, "etc"), ["# the token in use, then the one rotated in", TOKEN_A, TOKEN_B]);
    const serverConfig = tree.writeConfig(`${SIMULATE_TABLES(0.01)}[auth]\ntoken_file = ${JSON.stringify(tokenFile)}\n`);
    await using worker = await startWorker(serverConfig, { command: [binary] });
    const clientConfig = join(tree.root, "client.toml");
    writeFileSync(clientConfig, readFileSync(serverConfig, "utf8").replace(/^listen = .*$/m, `listen = "0.0.0.0:${new URL(worker.url).port}"`));

    const wrongInEnv = { LORA_WORKER_TOKEN: `${TOKEN_A.slice(0, -1)}0` };
    const [fromConfig, noToken, envBeatsConfig, flagBeatsEnv, envUrlBeatsConfig, portZero] = await Promise.all([
      runCli(binary, ["jobs", "--config", clientConfig]),
      runCli(binary, ["jobs", "--url", worker.url]),
      runCli(binary, ["jobs", "--config", clientConfig], wrongInEnv),
      runCli(binary, ["jobs", "--config", clientConfig, "--token", TOKEN_B], wrongInEnv),
      runCli(binary, ["jobs", "--config", clientConfig], { LORA_WORKER_URL: deadUrl() }),
      runCli(binary, ["jobs", "--config", serverConfig]),
    ]);
    expect(fromConfig).toEqual({ exitCode: 0, stdout: "no jobs\n", stderr: "" });
    expect(noToken.exitCode).toBe(5);
    expect(noToken.stderr).toContain("the worker answered 401:");
    expect(noToken.stderr).toContain("pass the worker's token: --token, LORA_WORKER_TOKEN, or --config");
    expect([envBeatsConfig.exitCode, flagBeatsEnv.exitCode, envUrlBeatsConfig.exitCode]).toEqual([5, 0, 4]);
    expect({ exitCode: portZero.exitCode, stderr: portZero.stderr.split("\n")[0] }).toEqual({
      exitCode: 2,
      stderr: `lora-worker jobs: listen in ${serverConfig} has port 0 (the worker picks a free port at start): pass --url or LORA_WORKER_URL`,
    });
  }, 60_000);
});
