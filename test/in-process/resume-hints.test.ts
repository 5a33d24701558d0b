import { describe, expect, test } from "bun:test";
import { inProcessApp } from "../support/app-harness.ts";
import { MAIN, makeHostTree, type HostTree } from "../support/host-tree.ts";
import { SIMULATOR, simulateModeConfig } from "../support/real-mode.ts";
import { waitFor } from "../support/wait.ts";

// Whenever a job the CLI shows ends with a state to go on from, it says how: `resume with: lora-worker resume ID`.
const TIMEOUT_MS = 60_000;

async function cli(url: string, tree: HostTree, ...args: string[]) {
  const proc = Bun.spawn([process.execPath, MAIN, ...args, "--url", url], {
    stdout: "pipe", stderr: "pipe", env: { PATH: process.env.PATH! }, cwd: tree.root,
  });
  const [code, out] = await Promise.all([proc.exited, new Response(proc.stdout).text()]);
  return { code, lines: out.trimEnd().split("\n") };
}

function served(tree: HostTree, simulate: Record<string, unknown>) {
  const a = inProcessApp(tree, simulateModeConfig(tree, simulate), SIMULATOR);
  const server = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: a.app.fetch });
  return {
    ...a,
    url: server.url.origin,
    async [Symbol.asyncDispose]() {
      server.stop(true);
      await a[Symbol.asyncDispose]();
    },
  };
}

// `lora-worker submit --follow` of one request, under a simulator that fails as `fail` says.
async function submitFollowed(fail: string) {
  using tree = makeHostTree();
  await using a = served(tree, { seconds_per_step: 0, fail });
  await Bun.write(`${tree.root}/request.json`, JSON.stringify(tree.validRequest()));
  return await cli(a.url, tree, "submit", "request.json", "--follow");
}

describe("the CLI says how to go on from a saved state", () => {
  test("submit --follow of a run that fails after its first state ends with the resume command", async () => {
    const { code, lines } = await submitFollowed("oom@50");
    expect(code).toBe(1);
    expect(lines.at(-1)).toMatch(/^resume with: lora-worker resume [0-9a-f-]{36}$/);
  }, TIMEOUT_MS);

  test("contrast: a run that fails before any state says nothing of a resume", async () => {
    const { code, lines } = await submitFollowed("oom@3");
    expect(code).toBe(1);
    expect(lines.join("\n")).not.toContain("resume with:");
  }, TIMEOUT_MS);

  test("cancel of a run past its first state says the state was kept, and how to resume", async () => {
    using tree = makeHostTree();
    await using a = served(tree, { seconds_per_step: 0.02 });
    const id = (await a.json("/train", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(tree.validRequest()) })).body.worker_job_id;
    await waitFor(async () => (await a.json(`/train/${id}`)).body.resume_step !== null, "the first state");
    const { code, lines } = await cli(a.url, tree, "cancel", id);
    expect(code).toBe(0);
    expect(lines.slice(-2)).toEqual([expect.stringMatching(/^its saved state at step \d+ was kept$/), `resume with: lora-worker resume ${id}`]);
  }, TIMEOUT_MS);
});
