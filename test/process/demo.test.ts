import { describe, expect, test } from "bun:test";
import { REPO } from "../support/host-tree.ts";
import { SCORER_TEST_MS } from "../support/face-scorer.ts";

// The README's first command after its set-up, as a newcomer runs it: `bun run demo`.
describe("bun run demo", () => {
  test("carries one request to a verified LoRA and draws its likeness: learned, at the step the previews turned", async () => {
    const proc = Bun.spawn([process.execPath, "run", "demo"], { cwd: REPO, env: { PATH: process.env.PATH ?? "/usr/bin:/bin" }, stdout: "pipe", stderr: "pipe" });
    const [stdout, stderr, exitCode] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
    expect({ exitCode, stderr: stderr.split("\n").filter((l) => l.includes('"level":"error"')) }).toEqual({ exitCode: 0, stderr: [] });
    expect(stdout).toMatch(/^OK: .*ohwx_person\.safetensors \(\d+ bytes\) matches lora_sha256 [0-9a-f]{64}$/m);
    expect(stdout).toContain("the dataset's faces: 3 photos with one face, 0 with none, 0 with several");
    // Someone else before step 200, the person from it (scratch-host.ts' LEARNED_AT): a bar past the mark, then short.
    const trigger = [...stdout.matchAll(/^ {2}step +(\d+) {2}trigger (.*) (\d\.\d\d)$/gm)].map((m) => [Number(m[1]), Number(m[3]) <= 0.6]);
    expect(trigger).toEqual([[100, false], [200, true], [300, true], [400, true]]);
    expect(stdout).toContain("  verdict: learned: the trigger's previews show the person, the class's do not");
    expect(stdout).toMatch(/^ {2}best: step 200: http:\/\/127\.0\.0\.1:\d+\/train\/[0-9a-f-]+\/checkpoints\/200 \(sha256 [0-9a-f]{64}\)$/m);
  }, SCORER_TEST_MS);
});
