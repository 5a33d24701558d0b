import { describe, expect, test } from "bun:test";
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { runDoctor } from "../support/doctor-host.ts";
import { MAIN, REPO } from "../support/host-tree.ts";
import { freePort } from "../support/scratch-files.ts";
import { startWorker } from "../support/worker-process.ts";

const PATH_ONLY = { PATH: process.env.PATH ?? "/usr/bin:/bin" };

async function run(argv: string[], cwd = REPO): Promise<{ exitCode: number; stdout: string; stderr: string }> {
  const proc = Bun.spawn(argv, { cwd, env: PATH_ONLY, stdout: "pipe", stderr: "pipe" });
  const [stdout, stderr, exitCode] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  return { exitCode, stdout, stderr };
}

function scratchDir(): { dir: string } & Disposable {
  const base = mkdtempSync(join(tmpdir(), "lora-worker-scratch-"));
  return { dir: join(base, "host"), [Symbol.dispose]: () => rmSync(base, { recursive: true, force: true }) };
}

// The README's development path, followed literally: lay out a scratch host, serve its config, submit its request.
describe("bun run scratch-host DIR", () => {
  test("lays out a host that serve starts on as written, whose example request the CLI submits to a verified LoRA", async () => {
    using scratch = scratchDir();
    const listen = `127.0.0.1:${freePort()}`;
    const laid = await run([process.execPath, "run", "scratch-host", scratch.dir, "--listen", listen, "--seconds-per-step", "0.01"]);
    expect(laid.exitCode).toBe(0);
    const config = join(scratch.dir, "config.toml");
    const request = join(scratch.dir, "request.json");
    expect(laid.stdout).toContain(`bun src/main.ts serve --config ${config}\n`);
    expect(laid.stdout).toContain(`bun src/main.ts submit ${request} --config ${config} --follow`);

    await using worker = await startWorker(config);
    expect(worker.url).toBe(`http://${listen}`);
    const submitted = await run([process.execPath, MAIN, "submit", request, "--config", config, "--follow"]);
    expect({ exitCode: submitted.exitCode, stderr: submitted.stderr }).toEqual({ exitCode: 0, stderr: "" });
    const lora = join(scratch.dir, "train/example/out/ohwx_person.safetensors");
    const sha256 = new Bun.CryptoHasher("sha256").update(readFileSync(lora)).digest("hex");
    expect(submitted.stdout.trimEnd().split("\n").at(-1)).toMatch(new RegExp(`^succeeded after \\d+s: ${lora} \\(\\d+\\.\\d KiB, sha256 ${sha256}\\)$`));

    // The contrast: the host's token is what --config brought; without it the worker refuses.
    const noToken = await run([process.execPath, MAIN, "jobs", "--url", worker.url]);
    expect(noToken.exitCode).toBe(5);
    expect(noToken.stderr).toContain("the worker answered 401");

    // Its dataset reads as a person's photos do: the trigger put into three captions and found in one, and no
    // image small or the same as another (four distinct files, each big enough for every tier).
    const job = JSON.parse((await run([process.execPath, MAIN, "jobs", "--json", "--limit", "1", "--config", config])).stdout);
    expect(job.dataset.prepared).toMatchObject({
      captions: { trigger_added: 3, trigger_present: 1, images_without_caption: 0, cut: [] }, small: [], duplicates: [],
    });
    const folder = join(scratch.dir, "train/example/dataset/10_ohwx person");
    const images = readdirSync(folder).filter((f) => f.endsWith(".png"));
    expect(images).toHaveLength(4);
    expect(new Set(images.map((f) => new Bun.CryptoHasher("sha256").update(readFileSync(join(folder, f))).digest("hex"))).size).toBe(4);
  }, 60_000);

  test("lora-worker smoke passes on the host as laid out, at its own pace; contrast: without its smoke.base_model it is refused", async () => {
    using scratch = scratchDir();
    const listen = `127.0.0.1:${freePort()}`;
    expect((await run([process.execPath, "run", "scratch-host", scratch.dir, "--listen", listen])).exitCode).toBe(0);
    const config = join(scratch.dir, "config.toml");
    const smoke = () => run([process.execPath, MAIN, "smoke", "--config", config, "--device", "0"]);
    {
      await using worker = await startWorker(config);
      const passed = await smoke();
      expect({ exitCode: passed.exitCode, stderr: passed.stderr, last: passed.stdout.trimEnd().split("\n").at(-1) }).toEqual({
        exitCode: 0, stderr: "", last: expect.stringMatching(/^smoke: passed in [\d.]+s$/),
      });
      expect(worker.url).toBe(`http://${listen}`);
    }
    const text = readFileSync(config, "utf8");
    writeFileSync(config, text.slice(0, text.indexOf("[smoke]")));
    await using worker = await startWorker(config);
    const refused = await smoke();
    expect(refused.exitCode).toBe(5);
    expect(refused.stderr).toContain("smoke_unavailable");
    expect(worker.url).toBe(`http://${listen}`);
  }, 60_000);

  test("the host passes doctor in simulate mode, and a second run into the same DIR changes nothing", async () => {
    using scratch = scratchDir();
    expect((await run([process.execPath, "run", "scratch-host", scratch.dir, "--listen", `127.0.0.1:${freePort()}`])).exitCode).toBe(0);
    const doctor = await runDoctor(["--config", join(scratch.dir, "config.toml"), "--unit", join(scratch.dir, "no-unit.service"), "--dev-dir", join(scratch.dir, "dev")]);
    expect(doctor.lines.filter((l) => l.startsWith("FAIL"))).toEqual([]);
    expect(doctor.code).toBe(0);

    writeFileSync(join(scratch.dir, "request.json"), "{}\n");
    const again = await run([process.execPath, "run", "scratch-host", scratch.dir]);
    expect(again.exitCode).toBe(1);
    expect(again.stderr).toContain(`scratch-host: ${scratch.dir} exists and is not empty`);
    expect(readFileSync(join(scratch.dir, "request.json"), "utf8")).toBe("{}\n");
  }, 60_000);
});
