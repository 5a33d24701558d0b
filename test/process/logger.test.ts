import { describe, expect, test } from "bun:test";
import { createLogger } from "../../src/logger.ts";

describe("logs", () => {
  test("are one JSON object per line for journald, with the job id as a field", () => {
    const lines: string[] = [];
    createLogger("json", (l) => lines.push(l)).info("job started", { job_id: "abc", tier: "fast" });
    expect(lines.length).toBe(1);
    expect(lines[0]!.endsWith("\n")).toBe(true);
    expect(JSON.parse(lines[0]!)).toEqual({ ts: expect.any(String), level: "info", msg: "job started", job_id: "abc", tier: "fast" });
  });

  test("read as a sentence with key=value pairs on a terminal", () => {
    const lines: string[] = [];
    createLogger("human", (l) => lines.push(l)).warn("gpu probe failed", { detail: "no devices were found", code: 6 });
    expect(lines[0]).toMatch(/^\d\d:\d\d:\d\d\.\d{3} WARN  gpu probe failed {2}detail="no devices were found" code=6\n$/);
  });

  test("a worker started on a terminal logs the human form (piped, as in every other test, it logs JSON)", async () => {
    const { makeHostTree, MAIN } = await import("../support/host-tree.ts");
    using tree = makeHostTree();
    const config = tree.writeConfig('[trainer]\nmode = "simulate"\n');
    const script = Bun.spawn(["script", "-qec", `${process.execPath} ${MAIN} serve --config ${config}`, "/dev/null"], { stdout: "pipe", stderr: "pipe" });
    let out = "";
    for await (const chunk of script.stdout) {
      out += new TextDecoder().decode(chunk);
      if (/INFO  listening/.test(out)) break;
    }
    script.kill("SIGKILL");
    Bun.spawnSync(["pkill", "-f", `serve --config ${config}`]);
    expect(out).toMatch(/INFO  listening  url=http:\/\/127\.0\.0\.1:\d+/);
    expect(out).not.toContain('"msg":"listening"');
  });
});
