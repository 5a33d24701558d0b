import { describe, expect, test } from "bun:test";
import { chownSync, existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { EXIT_CONFIG } from "../../src/cli/start.ts";
import { ensureBinary } from "../support/binary.ts";
import { makeHostTree, SIMULATE_TABLES, type HostTree } from "../support/host-tree.ts";
import { AS_ROOT, STAND_IN } from "../support/install-root.ts";
import { processesMentioning } from "../support/leftovers.ts";
import { startWorker } from "../support/worker-process.ts";
import { waitFor } from "../support/wait.ts";

const binary = ensureBinary();

// The tree's simulate config with its listen line (port 0) replaced.
function configListening(tree: HostTree, listen: string): string {
  const path = tree.writeConfig(SIMULATE_TABLES(0.01));
  writeFileSync(path, readFileSync(path, "utf8").replace(/^listen = .*$/m, `listen = ${JSON.stringify(listen)}`));
  return path;
}

async function serve(config: string, asUser?: string): Promise<{ code: number; stdout: string; stderr: string }> {
  const command = [binary, "serve", "--config", config];
  const proc = Bun.spawn(asUser ? ["runuser", "-u", asUser, "--", ...command] : command, {
    env: { PATH: process.env.PATH ?? "/usr/bin:/bin" },
    stdout: "pipe",
    stderr: "pipe",
  });
  const [code, stdout, stderr] = await Promise.all([proc.exited, new Response(proc.stdout).text(), new Response(proc.stderr).text()]);
  return { code, stdout, stderr };
}

// One refusal line on stderr (the logger's JSON off a terminal), nothing that reads like a stack trace.
function refusal(stderr: string): { msg: string; errors: string[]; exit_code: number } {
  const lines = stderr.split("\n").filter((l) => l !== "");
  expect(lines).toHaveLength(1);
  expect(stderr).not.toMatch(/^\s+at /m);
  return JSON.parse(lines[0]!);
}

describe("serve on an address it cannot listen on", () => {
  test("an address another program holds: exit 78, one line naming the address and the cause, the state dir let go", async () => {
    using tree = makeHostTree();
    const holder = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
    try {
      const listen = `127.0.0.1:${holder.port}`;
      const run = await serve(configListening(tree, listen));
      expect(run.code).toBe(EXIT_CONFIG);
      const said = refusal(run.stderr);
      expect(said).toMatchObject({ msg: `refusing to start: cannot listen on ${listen}`, exit_code: EXIT_CONFIG });
      expect(said.errors).toEqual([`the address is in use by another program; find it with: ss -ltnp 'sport = :${holder.port}'; stop it or change listen`]);
      expect(run.stdout).not.toContain('"msg":"listening"');
      // Let go as a clean stop lets go: the next start finds no lock and skips the integrity check.
      expect(existsSync(join(tree.state, "lock"))).toBe(false);
    } finally {
      holder.stop(true);
    }
  });

  test("on a terminal too: one line naming the address and the cause, no stack trace", async () => {
    using tree = makeHostTree();
    const holder = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
    try {
      const config = configListening(tree, `127.0.0.1:${holder.port}`);
      const script = Bun.spawn(["script", "-qec", `${binary} serve --config ${config}`, "/dev/null"], {
        stdout: "pipe", stderr: "pipe", env: { PATH: process.env.PATH! },
      });
      const out = (await new Response(script.stdout).text()).replaceAll("\r\n", "\n");
      expect(await script.exited).toBe(EXIT_CONFIG);
      expect(out).toBe(
        `lora-worker: refusing to start, cannot listen on 127.0.0.1:${holder.port}: the address is in use by another ` +
          `program; find it with: ss -ltnp 'sport = :${holder.port}'; stop it or change listen\n`,
      );
    } finally {
      holder.stop(true);
    }
  });

  test("contrast: the same binary and config, once the port is free, listens on it", async () => {
    using tree = makeHostTree();
    const holder = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
    const port = holder.port;
    holder.stop(true);
    await using worker = await startWorker(configListening(tree, `127.0.0.1:${port}`), { command: [binary] });
    expect(worker.url).toBe(`http://127.0.0.1:${port}`);
    expect((await worker.request("/healthz")).status).toBe(200);
  });

  test.skipIf(!AS_ROOT)("a port below 1024 as an unprivileged user: exit 78, permission denied named; contrast: port 1024 and up listens", async () => {
    using tree = makeHostTree();
    for (const dir of [tree.root, tree.state]) chownSync(dir, STAND_IN.uid, STAND_IN.gid);
    const run = await serve(configListening(tree, "127.0.0.1:1"), STAND_IN.user);
    expect(run.code).toBe(EXIT_CONFIG);
    const said = refusal(run.stderr);
    expect(said.msg).toBe("refusing to start: cannot listen on 127.0.0.1:1");
    expect(said.errors[0]).toStartWith("permission denied: port 1 is below net.ipv4.ip_unprivileged_port_start");

    {
      await using worker = await startWorker(configListening(tree, "127.0.0.1:0"), { command: ["runuser", "-u", STAND_IN.user, "--", binary] });
      expect((await worker.request("/healthz")).status).toBe(200);
      expect(processesMentioning(tree.configPath)).toHaveLength(2); // runuser and the worker under it
    }
    // The worker under runuser ends with its test (it lived on as that user when only runuser was killed); its
    // SIGKILL is delivered when the kernel gets to it, which can come after runuser's exit.
    expect(await waitFor(() => (processesMentioning(tree.configPath).length === 0 ? "gone" : null), "the worker to end"))
      .toBe("gone");
  });
});
