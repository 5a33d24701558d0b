import { describe, expect, test } from "bun:test";
import { chmodSync, chownSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { makeDoctorHost, runDoctor, type DoctorHost } from "../support/doctor-host.ts";
import { SCORER_TEST_MS } from "../support/face-scorer.ts";
import { BITSANDBYTES_REPORT, CLIP_CAPTION_IDS, CUDA_REPORT, TORCH_REPORT, writeFakePython } from "../support/fake-python.ts";
import { writeStandInSdScripts } from "../support/stand-in-sd-scripts.ts";
import { CLIP_MERGES, swappedMerges } from "../support/tokenizers.ts";
import { CHECKPOINT_KEYS, writeCheckpoint } from "../support/checkpoints.ts";
import { makeHostTree, SIMULATE_TABLES, type HostTree } from "../support/host-tree.ts";
import { AS_ROOT, STAND_IN } from "../support/install-root.ts";
import { startWorker } from "../support/worker-process.ts";

const TIMEOUT_MS = 30_000;
const CHECKS = ["config", "service account", "accelerate", "torch", "cuda", "bitsandbytes", "sd-scripts", "sd-scripts argv", "python packages", "likeness", "tokenizers", "handoff root", "model root", "base model", "state dir", "trainer tmpdir", "nvidia-smi", "nvidia-uvm", "port", "token file", "read-token file"];

const checkName = (line: string) => /^(?:OK|WARN|FAIL) +([^:]+?)(?: \/\S+)?:/.exec(line)?.[1];
const failLines = (lines: string[]) => lines.filter((l) => l.startsWith("FAIL"));
// What the trainer's interpreter prints when bitsandbytes does not import (fixtures/real/SOURCES.md).
const BITSANDBYTES_TRACEBACK = readFileSync(join(import.meta.dir, "../fixtures/real/bitsandbytes-import-error-1.txt"), "utf8");

interface Missing {
  what: string;
  /** Takes the prerequisite away from a host that has everything; what it returns is disposed after the test. */
  breakIt(host: DoctorHost): Disposable | void;
  args?: string[];
  /** The FAIL line: the check's name, and words that name what is missing. */
  check: string;
  says: (host: DoctorHost) => string;
}

const MISSING: Missing[] = [
  { what: "a config key doctor does not know", breakIt: (h) => void writeFileSync(h.writeConfig(), "bogus = 1\n", { flag: "a" }), check: "config", says: () => "bogus: unknown key" },
  { what: "the service user", breakIt: () => {}, args: ["--user", "lw-no-such-user"], check: "service account", says: () => "user lw-no-such-user does not exist" },
  { what: "accelerate the service user may run", breakIt: (h) => chmodSync(h.venv, 0o700), check: "accelerate", says: (h) => `${h.accelerate} does not run as nobody` },
  {
    what: "a bitsandbytes that imports",
    breakIt: (h) => void writeFakePython(h.python, { reports: [TORCH_REPORT, CUDA_REPORT], stderr: BITSANDBYTES_TRACEBACK, exit: 1 }),
    check: "bitsandbytes",
    says: (h) => `${h.python} as nobody did not import bitsandbytes and take a step of AdamW8bit (the recipe's optimizer): exit 1, RuntimeError: CUDA Setup failed despite GPU being available.`,
  },
  {
    what: "a torch that can use CUDA",
    breakIt: (h) => void writeFakePython(h.python, { reports: [{ stage: "torch", version: "2.5.1+cpu" }, { ...CUDA_REPORT, available: false, cuda: null, devices: [] }] }),
    check: "cuda",
    says: () => "torch sees none of the 2 GPU(s) nvidia-smi lists (0 NVIDIA GeForce RTX 3090, 1 NVIDIA RTX A6000); ",
  },
  {
    what: "every GPU nvidia-smi lists in torch's view",
    breakIt: (h) => void writeFakePython(h.python, { reports: [TORCH_REPORT, { ...CUDA_REPORT, devices: CUDA_REPORT.devices.slice(0, 1) }, BITSANDBYTES_REPORT] }),
    check: "cuda",
    says: () => "torch sees 1: NVIDIA GeForce RTX 3090 of the 2 GPU(s) nvidia-smi lists",
  },
  {
    what: "an sd-scripts whose parser has every flag the worker launches with",
    breakIt: (h) => void writeStandInSdScripts(join(h.dir, "sd-scripts"), { without: "metadata_trigger_phrase" }),
    check: "sd-scripts argv",
    says: () => "its parser has no --metadata_trigger_phrase (every launch: fast, balanced, quality, smoke)",
  },
  { what: "sdxl_train_network.py", breakIt: (h) => rmSync(h.trainScript), check: "sd-scripts", says: (h) => `${h.trainScript} does not exist` },
  { what: "the handoff root", breakIt: (h) => rmSync(h.handoff, { recursive: true }), check: "handoff root", says: (h) => `${h.handoff} does not exist` },
  { what: "the handoff root's setgid bit", breakIt: (h) => chmodSync(h.handoff, 0o770), check: "handoff root", says: () => "setgid bit missing" },
  { what: "the handoff root's group", breakIt: (h) => chownSync(h.handoff, 0, 0), check: "handoff root", says: (h) => `${h.handoff} has group gid 0, not ${STAND_IN.group}` },
  { what: "a model root the service user can read", breakIt: (h) => chmodSync(h.models, 0o700), check: "model root", says: (h) => `${h.models} is not readable by nobody` },
  { what: "the base model smoke.base_model names", breakIt: (h) => rmSync(h.model), check: "base model", says: (h) => `smoke.base_model: ${h.model} does not exist` },
  {
    what: "an SDXL base model",
    breakIt: (h) => void writeCheckpoint(h.model, CHECKPOINT_KEYS.sd15),
    check: "base model",
    says: (h) => `smoke.base_model: ${h.model} is an SD 1.x checkpoint`,
  },
  {
    what: "any base model, with smoke.base_model unset",
    breakIt: (h) => {
      rmSync(h.model);
      writeFileSync(h.writeConfig(), readFileSync(h.writeConfig(), "utf8").replace(/^base_model = .*$/m, ""));
    },
    check: "base model",
    says: (h) => `no .safetensors in ${h.models}: no job has a base model to name — fix: copy the SDXL base checkpoint (sd_xl_base_1.0.safetensors) into ${h.models}`,
  },
  { what: "a state dir the service user can write", breakIt: (h) => chownSync(h.state, 0, 0), check: "state dir", says: (h) => `${h.state} is not writable by nobody` },
  { what: "a working nvidia-smi", breakIt: (h) => void h.writeConfig({ scenario: "no-driver" }), check: "nvidia-smi", says: () => "couldn't communicate with the NVIDIA driver" },
  {
    what: "a configured device",
    breakIt: (h) => void h.writeConfig({ extra: '[[devices]]\nindex = 0\nname = "RTX 3090"\nclass = "24gb"\n[[devices]]\nindex = 2\nname = "RTX A6000"\nclass = "48gb"\n' }),
    check: "nvidia-smi",
    says: () => "device 2 (RTX A6000) not seen by nvidia-smi",
  },
  {
    what: "the tokenizers",
    breakIt: (h) => rmSync(join(h.tokenizers, "laion_CLIP-ViT-bigG-14-laion2B-39B-b160k"), { recursive: true }),
    check: "tokenizers",
    says: (h) => `not ready in ${h.tokenizers}: laion_CLIP-ViT-bigG-14-laion2B-39B-b160k is missing`,
  },
  {
    what: "tokenizers the trainer's Python loads",
    breakIt: (h) => void writeFakePython(h.python, { tokenizerIds: null, stderr: "OSError: Unable to load vocabulary from file.", exit: 1 }),
    check: "tokenizers",
    says: (h) => `${h.python} as nobody did not load openai/clip-vit-large-patch14 and laion/CLIP-ViT-bigG-14-laion2B-39B-b160k from ${h.tokenizers}: exit 1, OSError: Unable to load vocabulary from file.`,
  },
  {
    what: "a whole merges.txt",
    breakIt: (h) => writeFileSync(join(h.tokenizers, "openai_clip-vit-large-patch14", "merges.txt"), CLIP_MERGES.slice(0, 300_000)),
    check: "tokenizers",
    says: (h) => `not ready in ${h.tokenizers}: openai_clip-vit-large-patch14/merges.txt holds 29418 merges after its #version line, not CLIP's 48894 (cut short?)`,
  },
  {
    what: "CLIP's merges exactly (two swapped, vocab.json rebuilt to agree with them)",
    breakIt: (h) => {
      const swapped = swappedMerges(40001);
      writeFileSync(join(h.tokenizers, "laion_CLIP-ViT-bigG-14-laion2B-39B-b160k", "merges.txt"), swapped.merges);
      writeFileSync(join(h.tokenizers, "laion_CLIP-ViT-bigG-14-laion2B-39B-b160k", "vocab.json"), swapped.vocab);
    },
    check: "tokenizers",
    says: (h) => {
      const clip = CLIP_MERGES.split("\n");
      return `not ready in ${h.tokenizers}: laion_CLIP-ViT-bigG-14-laion2B-39B-b160k/merges.txt line 40002: ` +
        `${JSON.stringify(clip[40002])} where CLIP has ${JSON.stringify(clip[40001])}`;
    },
  },
  {
    what: "tokenizers the trainer's Python reads as CLIP's",
    breakIt: (h) => void writeFakePython(h.python, { captionIds: [49406, 320, 1125, 539, 49407] }),
    check: "tokenizers",
    says: (h) => `${h.python} as nobody tokenizes "a photo of ohwx person" with openai/clip-vit-large-patch14 from ${h.tokenizers} as [49406, 320, 1125, 539, 49407], not CLIP's [${CLIP_CAPTION_IDS.join(", ")}]`,
  },
  { what: "/dev/nvidia-uvm", breakIt: (h) => rmSync(h.uvm), check: "nvidia-uvm", says: (h) => `${h.uvm} does not exist` },
  {
    what: "a free port",
    breakIt: (h) => {
      const other = Bun.serve({ hostname: "127.0.0.1", port: h.port, fetch: () => new Response("not lora-worker", { status: 404 }) });
      return { [Symbol.dispose]: () => void other.stop(true) };
    },
    check: "port",
    says: (h) => `127.0.0.1:${h.port} is held by another program`,
  },
  {
    what: "a port in range",
    breakIt: (h) => writeFileSync(h.writeConfig(), readFileSync(h.writeConfig(), "utf8").replace(/^listen = .*$/m, 'listen = "127.0.0.1:99999"')),
    check: "config",
    says: () => "serve refuses to start: listen: port 99999 is out of range: 1 to 65535, or 0 to pick a free one — fix: edit ",
  },
  {
    what: "a port the service user may bind",
    breakIt: (h) => writeFileSync(h.writeConfig(), readFileSync(h.writeConfig(), "utf8").replace(/^listen = .*$/m, 'listen = "127.0.0.1:1"')),
    check: "port",
    says: () => "cannot listen on 127.0.0.1:1: permission denied: port 1 is below net.ipv4.ip_unprivileged_port_start and the service user may not bind it (the unit grants no CAP_NET_BIND_SERVICE) — fix: change listen to a port of 1024 or above",
  },
  { what: "a token file", breakIt: (h) => rmSync(h.token), check: "token file", says: (h) => `${h.token} does not exist` },
  { what: "a token file closed to other users", breakIt: (h) => chmodSync(h.token, 0o644), check: "token file", says: (h) => `${h.token} is mode 0644, open to every user` },
  { what: "a token file owned by root or the service user", breakIt: (h) => chownSync(h.token, 1, STAND_IN.gid), check: "token file", says: (h) => `${h.token} is owned by uid 1, not root or nobody` },
  { what: "a token in the token file", breakIt: (h) => writeFileSync(h.token, "\n"), check: "token file", says: (h) => `${h.token} holds no token` },
  { what: "a token serve would accept", breakIt: (h) => writeFileSync(h.token, "short\n"), check: "token file", says: (h) => `${h.token} line 1: a token must be at least 16 characters` },
];

describe.skipIf(!AS_ROOT)("lora-worker doctor", () => {
  test("on a host with every prerequisite prints one OK line per check and exits 0", async () => {
    using host = makeDoctorHost({ faceScorer: true });
    const { code, lines } = await host.doctor();
    expect(lines.slice(0, -1).map(checkName)).toEqual(CHECKS);
    expect(lines.filter((l) => !l.startsWith("OK "))).toEqual(["doctor: 0 FAIL, 0 WARN, 21 OK"]);
    expect(lines).toContain("OK   cuda: torch sees 2 CUDA device(s): 0 NVIDIA GeForce RTX 3090, 1 NVIDIA RTX A6000 (torch built for CUDA 12.4)");
    expect(code).toBe(0);
  }, SCORER_TEST_MS);

  for (const missing of MISSING) {
    test(`without ${missing.what}, a FAIL line names it and the exit code is 1`, async () => {
      using host = makeDoctorHost();
      using _broken = missing.breakIt(host) ?? undefined;
      const { code, lines } = await host.doctor(missing.args);
      const fail = failLines(lines).find((l) => checkName(l) === missing.check);
      expect(fail).toContain(missing.says(host));
      expect(fail).toContain(" — fix: ");
      expect(code).toBe(1);
    }, TIMEOUT_MS);
  }

  test("in simulate mode accelerate, the trainer's Python and sd-scripts are skipped with a WARN saying why, and the exit code stays 0", async () => {
    using host = makeDoctorHost();
    rmSync(host.venv, { recursive: true });
    rmSync(host.trainScript);
    host.writeConfig({ mode: "simulate" });
    const { code, lines } = await host.doctor();
    const skipped = 'trainer.mode is "simulate": not checked, no real training runs';
    for (const check of ["accelerate", "torch", "cuda", "bitsandbytes", "sd-scripts", "sd-scripts argv", "python packages", "tokenizers"]) expect(lines).toContain(`WARN ${check}: ${skipped}`);
    expect(failLines(lines)).toEqual([]);
    expect(code).toBe(0);
  }, TIMEOUT_MS);

  test("with models in the root but smoke.base_model unset, base model is a WARN naming them, and doctor still passes", async () => {
    using host = makeDoctorHost();
    writeFileSync(host.writeConfig(), readFileSync(host.writeConfig(), "utf8").replace(/^base_model = .*$/m, ""));
    const { code, lines } = await host.doctor();
    const unset = "smoke.base_model is unset, so lora-worker smoke is refused (409 smoke_unavailable) — fix: set smoke.base_model to one of them";
    expect(lines.find((l) => checkName(l) === "base model")).toBe(`WARN base model: ${host.model} in the model roots; ${unset}`);
    expect(code).toBe(0);
  }, TIMEOUT_MS);

  test("a port held by this worker is OK, unlike one held by another program", async () => {
    using host = makeDoctorHost();
    await using worker = await startWorker(host.writeConfig({ mode: "simulate" }));
    expect(worker.url).toBe(`http://127.0.0.1:${host.port}`);
    const { lines } = await host.doctor();
    expect(lines.find((l) => checkName(l) === "port")).toStartWith(`OK   port: 127.0.0.1:${host.port} is held by this worker (lora-worker `);
  }, TIMEOUT_MS);

  test("a port held by another worker (another state dir) is a FAIL naming that worker's state dir and config", async () => {
    using host = makeDoctorHost();
    const config = host.writeConfig({ mode: "simulate" });
    const otherState = join(host.dir, "other-state");
    mkdirSync(otherState, { mode: 0o700 });
    const otherConfig = join(host.dir, "other.toml");
    writeFileSync(otherConfig, readFileSync(config, "utf8").replace(`state_dir = "${host.state}"`, `state_dir = "${otherState}"`));
    await using other = await startWorker(otherConfig);
    expect(other.url).toBe(`http://127.0.0.1:${host.port}`);
    const { code, lines } = await host.doctor();
    expect(lines.find((l) => checkName(l) === "port")).toStartWith(`FAIL port: 127.0.0.1:${host.port} is held by another worker (lora-worker `);
    expect(lines.find((l) => checkName(l) === "port")).toContain(`with state dir ${otherState}, config ${otherConfig}), not the one this config describes — fix: stop that worker`);
    expect(code).toBe(1);
  }, TIMEOUT_MS);

  test("a config that is not TOML stops after the config line: the other checks need it", async () => {
    using host = makeDoctorHost();
    writeFileSync(join(host.dir, "config.toml"), "listen = \n");
    const { code, lines } = await host.doctor();
    expect(lines).toHaveLength(2);
    expect(lines[0]).toStartWith(`FAIL config: serve refuses to start: config file ${join(host.dir, "config.toml")} is not valid TOML`);
    expect(lines[1]).toBe("doctor: the other checks need a config that parses; fix it and run doctor again");
    expect(code).toBe(1);
  }, TIMEOUT_MS);
});

// The development host every simulated test runs on: mkdtemp's modes, no unit, no /dev/nvidia-uvm, no token file.
describe("lora-worker doctor on the suite's simulate config", () => {
  const RUNNING_USER = Bun.spawnSync(["id", "-un"]).stdout.toString().trim();
  const deploymentChecks = (lines: string[]) => lines.filter((l) => ["service account", "handoff root", "nvidia-uvm", "token file"].includes(checkName(l)!));

  function doctorOn(tree: HostTree, mode: "simulate" | "real", args: string[] = []) {
    const config = tree.writeConfig(SIMULATE_TABLES(0.01).replace('mode = "simulate"', `mode = "${mode}"`));
    return runDoctor(["--config", config, "--unit", join(tree.root, "no-such.service"), "--dev-dir", join(tree.root, "dev"), ...args]);
  }

  test("exits 0: what only the deployment or real training needs is a WARN that says why, and the account is the user running doctor", async () => {
    using tree = makeHostTree();
    const { code, lines } = await doctorOn(tree, "simulate");
    expect(failLines(lines)).toEqual([]);
    expect(code).toBe(0);
    expect(deploymentChecks(lines)).toEqual([
      expect.stringMatching(new RegExp(`^OK   service account: ${RUNNING_USER} \\(uid \\d+\\) .*, the user running doctor: no unit at ${tree.root}/no-such.service and no --user, and trainer.mode is "simulate": the worker runs as whoever starts it$`)),
      expect.stringMatching(/^WARN handoff root: .* setgid bit missing; .*; trainer.mode is "simulate": no arbo shares the directory through the group — fix: chmod 2770 /),
      expect.stringMatching(/^WARN nvidia-uvm: .*\/dev\/nvidia-uvm does not exist .*; trainer.mode is "simulate": the simulated trainer uses no CUDA — fix: /),
      expect.stringMatching(new RegExp(`^WARN token file: ${tree.root}/no-token does not exist; trainer.mode is "simulate": serve runs without a token on the loopback listen 127.0.0.1:0, open to every local user — fix: `)),
    ]);
    expect(lines.join("\n")).not.toContain("llmuser");
  });

  test("in real mode the same host fails those four checks (the contrast)", async () => {
    using tree = makeHostTree();
    const { code, lines } = await doctorOn(tree, "real");
    expect(deploymentChecks(lines).map((l) => l.slice(0, 4))).toEqual(["FAIL", "FAIL", "FAIL", "FAIL"]);
    expect(lines.find((l) => checkName(l) === "service account")).toContain(`no unit at ${tree.root}/no-such.service and no --user, so which account serve runs as is unknown`);
    expect(code).toBe(1);
  });

  test("an installed unit names the account; one naming a user that does not exist fails even in simulate mode", async () => {
    using tree = makeHostTree();
    const unit = join(tree.root, "lora-worker.service");
    writeFileSync(unit, `[Service]\nUser=${STAND_IN.user}\nGroup=${STAND_IN.group}\nExecStart=/opt/lora-worker/lora-worker serve\n`);
    const named = await doctorOn(tree, "simulate", ["--unit", unit]);
    expect(named.lines.find((l) => checkName(l) === "service account")).toContain(`${STAND_IN.user} (uid ${STAND_IN.uid}) with group ${STAND_IN.group} (gid ${STAND_IN.gid}) (named by ${unit})`);

    mkdirSync(`${unit}.d`);
    writeFileSync(join(`${unit}.d`, "override.conf"), "[Service]\nUser=lw-no-such-user\n");
    const missing = await doctorOn(tree, "simulate", ["--unit", unit]);
    expect(failLines(missing.lines).map(checkName)).toEqual(["service account"]);
    expect(failLines(missing.lines)[0]).toStartWith(`FAIL service account: user lw-no-such-user does not exist (named by ${unit})`);
    expect(missing.code).toBe(1);
  });
});
