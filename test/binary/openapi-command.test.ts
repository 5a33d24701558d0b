import { describe, expect, setDefaultTimeout, test } from "bun:test";
import { join } from "node:path";
import { TOKEN_A, writeTokens } from "../support/auth-setup.ts";
import { ensureBinary } from "../support/binary.ts";
import { runCli } from "../support/cli-process.ts";
import { makeHostTree, SIMULATE_TABLES } from "../support/host-tree.ts";
import { compile, generateTypes, scratchDir } from "../support/openapi-tools.ts";
import { startWorker } from "../support/worker-process.ts";

setDefaultTimeout(60_000);

const binary = ensureBinary();

// What a client's typed code leans on: the dispatch, its 422 items' closed list of types, a job read back.
const CLIENT = `import createClient from "openapi-fetch";
import type { components, paths } from "./api";

const client = createClient<paths>({ baseUrl: "http://127.0.0.1:8203" });

export async function dispatch(body: components["schemas"]["TrainRequest"]) {
  const { data, error } = await client.POST("/train", { body });
  const types: Array<components["schemas"]["DetailItem"]["type"]> = [];
  if (error && Array.isArray(error.detail)) for (const item of error.detail) types.push(item.type);
  const known: components["schemas"]["DetailItem"]["type"] = "tier_device_mismatch";
  // @ts-expect-error not a type a 422 item carries
  const unknown: components["schemas"]["DetailItem"]["type"] = "invalid_value";
  return [data?.worker_job_id, types, known, unknown];
}
`;

describe("lora-worker openapi", () => {
  test("prints, with no server, config or token, the very document a worker of the same binary serves behind its token", async () => {
    using scratch = scratchDir();
    const printed = await runCli(binary, ["openapi"], { LORA_WORKER_CONFIG: "/nonexistent/config.toml" });
    expect({ exitCode: printed.exitCode, stderr: printed.stderr }).toEqual({ exitCode: 0, stderr: "" });
    const document = JSON.parse(printed.stdout);

    using tree = makeHostTree();
    const tokens = writeTokens(join(tree.root, "etc"), [TOKEN_A]);
    const config = tree.writeConfig(`${SIMULATE_TABLES(0.01)}[auth]\ntoken_file = ${JSON.stringify(tokens)}\n`);
    await using worker = await startWorker(config, { command: [binary], env: { LORA_WORKER_LISTEN: "0.0.0.0:0" } });
    const served = await worker.json("/openapi.json", { headers: { authorization: `Bearer ${TOKEN_A}` } });
    expect(served).toEqual({ status: 200, body: document });
    // The route stays behind the token: the command is how a CI job without the secret gets the document.
    expect((await worker.request("/openapi.json")).status).toBe(401);

    await generateTypes(document, scratch.dir);
    await Bun.write(join(scratch.dir, "client.ts"), CLIENT);
    expect(await compile(scratch.dir, "client.ts")).toEqual({ exitCode: 0, output: "" });
  });

  test("contrast: an argument is a usage error, and nothing is printed on stdout", async () => {
    const refused = await runCli(binary, ["openapi", "--config", "x.toml"]);
    expect({ exitCode: refused.exitCode, stdout: refused.stdout, first: refused.stderr.split("\n")[0] })
      .toEqual({ exitCode: 2, stdout: "", first: 'lora-worker openapi: openapi takes no arguments, got "--config"' });
  });
});
