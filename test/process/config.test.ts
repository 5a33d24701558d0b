import { describe, expect, test } from "bun:test";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { loadConfig } from "../../src/config/load.ts";
import { bigConfig, lineOf } from "../support/big-config.ts";
import { MAIN, makeHostTree, simulateConfig } from "../support/host-tree.ts";

// The tree's config with its listen line (port 0) replaced.
function withListen(path: string, listen: string): string {
  writeFileSync(path, readFileSync(path, "utf8").replace(/^listen = .*$/m, `listen = ${JSON.stringify(listen)}`));
  return path;
}

describe("config", () => {
  test("a file naming only the paths loads, and every other key is reported as a default in use", async () => {
    using tree = makeHostTree();
    const result = await loadConfig({ path: tree.writeConfig('[trainer]\nmode = "simulate"\n'), env: {} });
    if (!result.ok) throw new Error(result.error.join("\n"));
    expect(result.value.config.trainer.accelerate).toBe("/opt/fluxgym/.venv/bin/accelerate");
    expect(result.value.defaultsInUse).toContain("trainer.accelerate");
    expect(result.value.defaultsInUse).not.toContain("trainer.mode");
    expect(result.value.defaultsInUse).not.toContain("handoff_root");
  });

  test("real mode insists on an executable accelerate and an sd-scripts checkout", async () => {
    using tree = makeHostTree();
    const result = await loadConfig({ path: tree.writeConfig(), env: {} });
    expect(result).toEqual({
      ok: false,
      error: [
        "trainer.accelerate: /opt/fluxgym/.venv/bin/accelerate does not exist",
        "trainer.sd_scripts_dir: /opt/fluxgym/sd-scripts/sdxl_train_network.py does not exist",
      ],
    });
  });

  test("environment variables override the file and are reported", async () => {
    using tree = makeHostTree();
    const env = { LORA_WORKER_TRAINER_MODE: "simulate", LORA_WORKER_SIMULATE_SECONDS_PER_STEP: "0.25" };
    const result = await loadConfig({ path: tree.writeConfig(), env });
    if (!result.ok) throw new Error(result.error.join("\n"));
    expect(result.value.config.trainer.mode).toBe("simulate");
    expect(result.value.config.simulate.seconds_per_step).toBe(0.25);
    expect(result.value.envOverrides.sort()).toEqual(["simulate.seconds_per_step", "trainer.mode"]);
  });

  test("one refusal names every bad key: unknown keys, wrong types, missing paths, bad overrides", async () => {
    using tree = makeHostTree();
    const path = tree.writeConfig('colour = "blue"\n[trainer]\nmode = "simulate"\nspeed = 3\n[simulate]\nseconds_per_step = "fast"\n');
    const result = await loadConfig({ path, env: { LORA_WORKER_LISTN: "x", LORA_WORKER_GPU_PROBE_TIMEOUT_MS: "soon" } });
    expect(result.ok).toBe(false);
    const errors = result.ok ? [] : result.error;
    expect(errors.map((e) => e.split(":")[0]).sort()).toEqual([
      "LORA_WORKER_GPU_PROBE_TIMEOUT_MS",
      "LORA_WORKER_LISTN",
      "colour",
      "simulate.seconds_per_step",
      "trainer.speed",
    ]);
    expect(errors).toContain('LORA_WORKER_GPU_PROBE_TIMEOUT_MS: expected a number, got "soon"');
  });

  test("an unknown key or override names the one meant: a sibling spelled nearly so, or the same name in its table; a word like no key gets no guess", async () => {
    using tree = makeHostTree();
    const path = tree.writeConfig('token_file = "/x"\ncolour = "blue"\n[trainer]\nmode = "simulate"\n[auth]\nmetrics_publik = true\n');
    const result = await loadConfig({ path, env: { LORA_WORKER_LISTN: "x" } });
    const errors = result.ok ? [] : result.error;
    expect(errors).toEqual(expect.arrayContaining([
      "token_file: unknown key (did you mean auth.token_file?)",
      "auth.metrics_publik: unknown key (did you mean auth.metrics_public?)",
      "colour: unknown key",
      expect.stringMatching(/^LORA_WORKER_LISTN: unknown environment override \(did you mean LORA_WORKER_LISTEN\?\) \(known: /),
    ]));
  });

  test("a TOML syntax error names its line and column, as the file has them", async () => {
    using tree = makeHostTree();
    const cases: Array<[string, string]> = [
      ['listen = "127.0.0.1:8203"\n\n[trainer]\nmode = simulate\n', 'line 4, column 8: Strings must be quoted: "simulate"'],
      ['[trainer]\nmode = "simulate"\n[gpu]\nnvidia_smi = = "x"\n', "line 4, column 14: Expected a value but found '='"],
      ['[trainer]\nmode = "simulate"\nmode = "real"\n', "line 3, column 1: Cannot redefine key 'mode'"],
    ];
    for (const [text, where] of cases) {
      const path = join(tree.root, "bad.toml");
      writeFileSync(path, text);
      expect(await loadConfig({ path, env: {} })).toEqual({ ok: false, error: [`config file ${path} is not valid TOML: ${where}`] });
    }
  });

  test("a TOML error on the last lines of a 1 MB config names its line, not one inside a string that reads alike", async () => {
    using tree = makeHostTree();
    const path = join(tree.root, "big.toml");
    const head = simulateConfig(tree);
    const cases: Array<[string, string, string]> = [
      ['[trainer]\nmode = "simulate"\n[gpu]\nnvidia_smi = = "x"\n# the end\n', 'nvidia_smi = = "x"', "column 14: Expected a value but found '='"],
      ['[trainer]\nmode = "simulate"\nnote = """\nmode = "real"\n"""\nmode = "real"\n', 'mode = "real"', "column 1: Cannot redefine key 'mode'"],
    ];
    for (const [tail, faulty, what] of cases) {
      const text = bigConfig(head, tail);
      expect(text.length).toBeGreaterThan(1024 * 1024);
      writeFileSync(path, text);
      const error = `config file ${path} is not valid TOML: line ${lineOf(text, faulty)}, ${what}`;
      expect(await loadConfig({ path, env: {} })).toEqual({ ok: false, error: [error] });
    }
    writeFileSync(path, bigConfig(head, '[trainer]\nmode = "simulate"\n'));
    expect((await loadConfig({ path, env: {} })).ok).toBe(true);
  });

  test("slurm.mem takes a Slurm memory size and is handed to sbatch as given; anything else is refused by name", async () => {
    using tree = makeHostTree();
    for (const [mem, ok] of [["48G", true], ["512M", true], ["", true], ["48 GB", false], ["0G", false], ["-1", false]] as const) {
      const path = tree.writeConfig(`[trainer]\nmode = "simulate"\n[slurm]\nmem = ${JSON.stringify(mem)}\n`);
      const result = await loadConfig({ path, env: {} });
      if (ok) expect(result.ok && result.value.config.slurm.mem).toBe(mem);
      else expect(result.ok ? [] : result.error).toEqual(["slurm.mem: must be a Slurm memory size like 48G, or empty"]);
    }
  });

  test("simulate.fail takes exactly the failure grammar the simulated trainer parses, and names the bad item", async () => {
    using tree = makeHostTree();
    const load = (keys: string) => loadConfig({ path: tree.writeConfig(`[trainer]\nmode = "simulate"\n[simulate]\n${keys}\n`), env: {} });
    const accepted = ["", "oom@3", "nan@5,hang@7", "exit@2:0,exit@3:255", "ignore-sigterm,orphan@2,setsid-orphan@10"];
    for (const fail of accepted) {
      const loaded = { ok: true, value: { config: { simulate: { fail } } } };
      expect(await load(`fail = ${JSON.stringify(fail)}`)).toMatchObject(loaded);
    }
    const forms = "oom@N, nan@N, exit@N:CODE, hang@N, orphan@N, setsid-orphan@N, sample-oom@N, ignore-sigterm";
    const refusals: Array<[string, string]> = [
      ["boom@1", `"boom@1" is not one of ${forms}`],
      ["oom@3,", `"" is not one of ${forms}`],
      ["oom@0", 'step in "oom@0" must be at least 1'],
      ["nan@05", 'numbers in "nan@05" must not have leading zeros'],
      ["exit@2:256", 'exit code in "exit@2:256" must be 0-255'],
    ];
    for (const [fail, why] of refusals) {
      const errors = [`simulate.fail: must be "" or a comma-separated list of failures: ${why}`];
      expect(await load(`fail = ${JSON.stringify(fail)}`)).toEqual({ ok: false, error: errors });
    }
    const replay = `replay_log = "/recorded/run.log"\nfail = "ignore-sigterm,setsid-orphan@2,oom@3"`;
    const only = "fail may hold only ignore-sigterm, orphan@N and setsid-orphan@N, as the recorded log decides how the run ends";
    const clash = `simulate.fail: oom@3 cannot join replay_log: with replay_log, ${only}`;
    expect(await load(replay)).toEqual({ ok: false, error: [clash] });
    expect((await load(replay.replace(",oom@3", ""))).ok).toBe(true);
  });

  test("the operator CLI's LORA_WORKER_URL and LORA_WORKER_TOKEN are not mistaken for overrides", async () => {
    using tree = makeHostTree();
    const result = await loadConfig({ path: tree.writeConfig('[trainer]\nmode = "simulate"\n'), env: { LORA_WORKER_URL: "http://127.0.0.1:8203", LORA_WORKER_TOKEN: "x".repeat(32) } });
    expect(result.ok).toBe(true);
  });

  test("listen takes a port from 1 to 65535, or 0 for a free one; a port past 65535 is refused by name", async () => {
    using tree = makeHostTree();
    const load = (listen: string, env: Record<string, string> = {}) =>
      loadConfig({ path: withListen(tree.writeConfig('[trainer]\nmode = "simulate"\n'), listen), env });
    for (const [listen, port] of [["127.0.0.1:1", 1], ["127.0.0.1:65535", 65535], ["[::1]:8203", 8203], ["127.0.0.1:0", 0]] as const) {
      expect(await load(listen)).toMatchObject({ ok: true, value: { config: { listen: { text: listen, port } } } });
    }
    for (const port of [65536, 99999]) {
      const error = [`listen: port ${port} is out of range: 1 to 65535, or 0 to pick a free one`];
      expect(await load(`127.0.0.1:${port}`)).toEqual({ ok: false, error });
    }
    // The environment's override is held to the same range.
    const overridden = await load("127.0.0.1:8203", { LORA_WORKER_LISTEN: "127.0.0.1:70000" });
    expect(overridden.ok ? [] : overridden.error).toEqual(["listen: port 70000 is out of range: 1 to 65535, or 0 to pick a free one"]);
  });

  test("a handoff root that does not exist refuses the config", async () => {
    using tree = makeHostTree();
    writeFileSync(tree.configPath, `handoff_root = "${join(tree.root, "nope")}"\nmodel_roots = ["${tree.models}"]\nstate_dir = "${tree.state}"\n[trainer]\nmode = "simulate"\n`);
    const result = await loadConfig({ path: tree.configPath, env: {} });
    expect(result).toEqual({ ok: false, error: [`handoff_root: directory ${join(tree.root, "nope")} does not exist`] });
  });

  test("an explicit config file that does not exist is an error, not silently the defaults", async () => {
    const result = await loadConfig({ path: "/nonexistent/config.toml", env: {} });
    expect(result).toEqual({ ok: false, error: ["config file /nonexistent/config.toml does not exist"] });
  });

  test("serve refuses to start on a bad config, exits 78 and lists the problems", async () => {
    using tree = makeHostTree();
    const path = tree.writeConfig("bogus = 1\n");
    const proc = Bun.spawn([process.execPath, MAIN, "serve", "--config", path], { stdout: "pipe", stderr: "pipe", env: { PATH: process.env.PATH! } });
    expect(await proc.exited).toBe(78);
    const stderr = await new Response(proc.stderr).text();
    expect(stderr).toContain("refusing to start");
    expect(stderr).toContain("bogus: unknown key");
    expect(stderr).toContain("trainer.accelerate:");
  });
});
