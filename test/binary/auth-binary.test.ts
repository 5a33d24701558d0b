import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import { TOKEN_A, TOKEN_B, writeTokens } from "../support/auth-setup.ts";
import { ensureBinary } from "../support/binary.ts";
import { makeHostTree, SIMULATE_TABLES, type HostTree } from "../support/host-tree.ts";
import { startWorker } from "../support/worker-process.ts";

const binary = ensureBinary();
const JOB = "3f1c2a4e-0000-4000-8000-000000000000";
const authTable = (tokenFile: string) => `[auth]\ntoken_file = ${JSON.stringify(tokenFile)}\n`;
const configWith = (tree: HostTree, tokenFile: string) => tree.writeConfig(SIMULATE_TABLES(0.01) + authTable(tokenFile));

describe("the compiled binary's auth", () => {
  test("a non-loopback listen without a token refuses to start with exit 78 and says how to create one", () => {
    using tree = makeHostTree();
    const tokenFile = join(tree.root, "etc", "token");
    const res = Bun.spawnSync([binary, "serve", "--config", configWith(tree, tokenFile)], { env: { PATH: process.env.PATH ?? "/usr/bin:/bin", LORA_WORKER_LISTEN: "0.0.0.0:0" } });
    expect(res.exitCode).toBe(78);
    expect(res.stderr.toString()).toContain("refusing to start");
    expect(res.stderr.toString()).toContain(`umask 077; openssl rand -hex 32 > ${tokenFile}`);
  });

  test('the same bind runs open once auth.mode is "none", and /healthz and the log say so', async () => {
    using tree = makeHostTree();
    await using worker = await startWorker(configWith(tree, join(tree.root, "etc", "token")), { command: [binary], env: { LORA_WORKER_LISTEN: "0.0.0.0:0", LORA_WORKER_AUTH_MODE: "none" } });
    expect((await worker.json("/healthz")).body).toMatchObject({ auth_mode: "none" });
    expect((await worker.request(`/train/${JOB}`)).status).toBe(404);
    expect(worker.output()).toContain('"auth_mode":"none"');
  });

  test("with tokens on a non-loopback bind every route but /healthz is 401 without one, and no token reaches the log", async () => {
    using tree = makeHostTree();
    await using worker = await startWorker(configWith(tree, writeTokens(join(tree.root, "etc"), [TOKEN_A, TOKEN_B])), { command: [binary], env: { LORA_WORKER_LISTEN: "0.0.0.0:0" } });
    const statuses: Record<string, number> = {};
    for (const [method, path] of [["POST", "/train"], ["GET", `/train/${JOB}`], ["GET", `/train/${JOB}/log`], ["POST", `/train/${JOB}/cancel`], ["GET", "/gpu-status"], ["GET", "/metrics"], ["GET", "/healthz"]]) {
      statuses[`${method} ${path}`] = (await worker.request(path!, { method })).status;
    }
    expect(statuses).toEqual({
      "POST /train": 401, [`GET /train/${JOB}`]: 401, [`GET /train/${JOB}/log`]: 401, [`POST /train/${JOB}/cancel`]: 401,
      "GET /gpu-status": 401, "GET /metrics": 401, "GET /healthz": 200,
    });
    const withToken = async (token: string) => (await worker.request(`/train/${JOB}`, { headers: { authorization: `Bearer ${token}` } })).status;
    expect([await withToken(TOKEN_A), await withToken(TOKEN_B), await withToken(`${TOKEN_B.slice(0, -1)}0`)]).toEqual([404, 404, 401]);
    expect((await worker.json("/healthz")).body).toMatchObject({ auth_mode: "token" });
    expect(worker.output()).toContain('"auth_mode":"token","auth_token_source":"token-file"');
    expect(worker.output()).not.toContain(TOKEN_A);
    expect(worker.output()).not.toContain(TOKEN_B);
  });

  test("a token handed in by systemd's LoadCredential= is the one that counts", async () => {
    using tree = makeHostTree();
    const credentials = join(tree.root, "credentials");
    writeTokens(credentials, [TOKEN_B]);
    await using worker = await startWorker(configWith(tree, writeTokens(join(tree.root, "etc"), [TOKEN_A])), { command: [binary], env: { CREDENTIALS_DIRECTORY: credentials } });
    const withToken = async (token: string) => (await worker.request(`/train/${JOB}`, { headers: { authorization: `Bearer ${token}` } })).status;
    expect([await withToken(TOKEN_B), await withToken(TOKEN_A)]).toEqual([404, 401]);
    expect(worker.output()).toContain('"auth_token_source":"systemd-credential"');
  });
});
