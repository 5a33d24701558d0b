import { describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { runCli } from "../support/cli-process.ts";

const MAIN = join(import.meta.dir, "../../src/main.ts");

// A client command reads only where the worker listens and its token: a config whose trainer paths do not exist
// here (the host's own, on a host where the trainer's venv lies elsewhere) does not stop it.
describe("a client command and the worker's config", () => {
  test("a config whose trainer paths and roots do not exist gives the client its token; a config with a bad key is still refused", async () => {
    const dir = mkdtempSync(join(tmpdir(), "lora-worker-client-config-"));
    try {
      writeFileSync(join(dir, "token"), "client-config-token-0123456789abcdef\n", { mode: 0o600 });
      const config = (extra: string) => {
        const path = join(dir, `config-${extra === "" ? "ok" : "bad"}.toml`);
        writeFileSync(path, `listen = "127.0.0.1:8203"\nstate_dir = "${dir}/state"\nhandoff_root = "/nowhere/handoff"\n` +
          `model_roots = ["/nowhere/models"]\n${extra}[auth]\ntoken_file = "${dir}/token"\n` +
          `[trainer]\naccelerate = "/nowhere/bin/accelerate"\nsd_scripts_dir = "/nowhere/sd-scripts"\n`);
        return path;
      };
      const seen: Array<string | null> = [];
      using server = Bun.serve({
        hostname: "127.0.0.1", port: 0,
        fetch: (req) => {
          seen.push(req.headers.get("authorization"));
          return Response.json({ detail: "the bearer token is not valid" }, { status: 401 });
        },
      });
      const asked = await runCli(process.execPath, [MAIN, "jobs", "--config", config(""), "--url", server.url.origin]);
      expect(asked.stderr).not.toContain("cannot use the worker's config");
      expect(seen).toEqual(["Bearer client-config-token-0123456789abcdef"]);
      // Contrast: a key the schema does not know is a fault of the file, named as before; no request is sent.
      const refused = await runCli(process.execPath, [MAIN, "jobs", "--config", config("colour = 1\n"), "--url", server.url.origin]);
      expect(refused.exitCode).toBe(2);
      expect(refused.stderr).toContain("cannot use the worker's config");
      expect(refused.stderr).toContain("colour");
      expect(seen).toHaveLength(1);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
