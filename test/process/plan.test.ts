import { describe, expect, test } from "bun:test";
import { existsSync, readdirSync } from "node:fs";
import { basename, join } from "node:path";
import { MAIN, makeHostTree, type HostTree } from "../support/host-tree.ts";
import { writeTokenizers } from "../support/tokenizers.ts";

// Every flag sd-scripts' sdxl_train_network.py is given: full names only (argparse accepts prefixes).
const SCRIPT_FLAGS = [
  "pretrained_model_name_or_path", "tokenizer_cache_dir", "dataset_config", "output_dir", "output_name", "save_model_as", "save_precision",
  "network_module", "network_dim", "network_alpha", "metadata_title", "metadata_trigger_phrase", "network_train_unet_only", "learning_rate", "unet_lr",
  "optimizer_type", "lr_scheduler", "lr_warmup_steps", "max_train_steps", "seed", "mixed_precision",
  "gradient_checkpointing", "sdpa", "cache_latents", "cache_latents_to_disk", "cache_text_encoder_outputs",
  "min_snr_gamma", "noise_offset", "max_data_loader_n_workers", "persistent_data_loader_workers",
  "console_log_simple", "caption_extension", "save_every_n_steps", "save_state", "save_last_n_steps",
  "save_last_n_steps_state",
];

async function plan(tree: HostTree, body: unknown, trainerTable = 'mode = "simulate"\n') {
  const requestPath = join(tree.root, "request.json");
  await Bun.write(requestPath, typeof body === "string" ? body : JSON.stringify(body));
  const config = tree.writeConfig(`[trainer]\n${trainerTable}`);
  const proc = Bun.spawn([process.execPath, MAIN, "plan", "--config", config, requestPath], { stdout: "pipe", stderr: "pipe", env: { PATH: process.env.PATH! } });
  const [code, stdout] = await Promise.all([proc.exited, new Response(proc.stdout).text()]);
  return { code, out: JSON.parse(stdout) };
}

describe("lora-worker plan", () => {
  test("the context is chosen from the dataset's captions as its preparation will choose it", async () => {
    using tree = makeHostTree();
    // By the bound plan counts with here (no tokenizer imported): one token per letter, 80 past the trigger.
    await Bun.write(join(tree.dataset, "img0.txt"), Array.from({ length: 80 }, () => "a").join(" "));
    const long = await plan(tree, tree.validRequest());
    expect(long.out.argv).toContain("--max_token_length=150");
    // Contrast: the same dataset with a short caption trains on one window, passed as no flag.
    await Bun.write(join(tree.dataset, "img0.txt"), "a man smiling");
    const short = await plan(tree, tree.validRequest());
    expect(short.out.argv.filter((a: string) => a.startsWith("--max_token_length"))).toEqual([]);
  });

  test("with CLIP's tokenizer, captions are counted as ftfy leaves them: 36 words of \"ǆ\", 75 in NFC, need 150", async () => {
    using tree = makeHostTree();
    const tokenizers = writeTokenizers(join(tree.root, "tokenizers"));
    const table = `mode = "simulate"\ntokenizer_dir = ${JSON.stringify(tokenizers)}\n`;
    // CLIPTokenizer with ftfy reads each "ǆ" as "dž": 111 tokens, 75 in NFC alone (test/fixtures/clip/hostile-captions.json).
    await Bun.write(join(tree.dataset, "img0.txt"), `ohwx, ${Array.from({ length: 36 }, () => "ǆ").join(" ")}.`);
    const digraphs = await plan(tree, tree.validRequest(), table);
    expect(digraphs.out.argv).toContain("--max_token_length=150");
    // Contrast: 36 words of the plain letters "dz", a token each, fit one window: the digraph's reading needs two.
    await Bun.write(join(tree.dataset, "img0.txt"), `ohwx, ${Array.from({ length: 36 }, () => "dz").join(" ")}.`);
    const plain = await plan(tree, tree.validRequest(), table);
    expect(plain.out.argv.filter((a: string) => a.startsWith("--max_token_length"))).toEqual([]);
  });

  test("in real mode the trainer is accelerate and the cwd is the sd-scripts checkout", async () => {
    using tree = makeHostTree();
    const venv = join(tree.root, "venv/bin");
    const sdScripts = join(tree.root, "sd-scripts");
    await Bun.write(join(venv, "accelerate"), "#!/bin/sh\n");
    await Bun.write(join(sdScripts, "sdxl_train_network.py"), "");
    Bun.spawnSync(["chmod", "+x", join(venv, "accelerate")]);
    const { code, out } = await plan(tree, tree.validRequest(), `mode = "real"\naccelerate = "${join(venv, "accelerate")}"\nsd_scripts_dir = "${sdScripts}"\n`);
    expect(code).toBe(0);
    expect(out.argv.slice(0, 2)).toEqual([join(venv, "accelerate"), "launch"]);
    expect(out.argv[7]).toBe(join(sdScripts, "sdxl_train_network.py"));
    expect(out.cwd).toBe(sdScripts);
    expect(out.env.PATH).toBe(`${venv}:/usr/local/bin:/usr/bin:/bin`);
    expect(out.env.LORA_WORKER_SIMULATE_SECONDS_PER_STEP).toBeUndefined();
  });

  test("prints the exact command of SPEC §4: launch flags, script flags as --flag=value, env, cwd", async () => {
    using tree = makeHostTree();
    const { code, out } = await plan(tree, tree.validRequest());
    expect(code).toBe(0);
    expect(Object.keys(out)).toEqual(["argv", "env", "cwd", "dataset_toml"]);
    const argv: string[] = out.argv;
    const launchAt = argv.indexOf("launch");
    expect(argv.slice(launchAt, launchAt + 7)).toEqual([
      "launch", "--num_processes=1", "--num_machines=1", "--mixed_precision=bf16", "--dynamo_backend=no",
      "--num_cpu_threads_per_process=1", "/opt/fluxgym/sd-scripts/sdxl_train_network.py",
    ]);
    const flags = argv.slice(launchAt + 7);
    expect(flags.map((f) => f.replace(/^--/, "").split("=")[0])).toEqual(SCRIPT_FLAGS);
    expect(flags).toContain(`--pretrained_model_name_or_path=${tree.model}`);
    expect(flags).toContain(`--dataset_config=${join(tree.state, "jobs/plan/dataset.toml")}`);
    // Offline, sd-scripts loads its CLIP tokenizers only from here (default: under the state dir).
    expect(flags).toContain(`--tokenizer_cache_dir=${join(tree.state, "tokenizers")}`);
    expect(flags).toContain("--max_train_steps=400");
    expect(flags).toContain("--network_dim=16");
    expect(flags).toContain("--seed=42");
    expect(flags).toContain("--caption_extension=.txt");
    // SDXL base's own noise offset; no caption here needs more than one CLIP window, so no --max_token_length.
    expect(flags).toContain("--noise_offset=0.0357");
    // The LoRA's modelspec header names it and its trigger.
    expect(flags).toContain("--metadata_title=mylora");
    expect(flags).toContain("--metadata_trigger_phrase=ohwx");
    // A fast run saves a state and an intermediate LoRA every 40 steps and keeps only the newest of each.
    expect(flags.slice(-4)).toEqual(["--save_every_n_steps=40", "--save_state", "--save_last_n_steps=39", "--save_last_n_steps_state=39"]);
    expect(out.cwd).toBe(join(tree.state, "jobs/plan"));
    expect(out.env).toEqual({
      PATH: "/opt/fluxgym/.venv/bin:/usr/local/bin:/usr/bin:/bin",
      HOME: tree.state,
      LANG: "C.UTF-8",
      CUDA_DEVICE_ORDER: "PCI_BUS_ID",
      CUDA_VISIBLE_DEVICES: "0",
      PYTHONUNBUFFERED: "1",
      HF_HOME: join(tree.state, "hf-home"),
      HF_HUB_OFFLINE: "1",
      TMPDIR: "/dev/shm/lora-worker-plan",
      LORA_WORKER_JOB: "plan",
      LORA_WORKER_SIMULATE_SECONDS_PER_STEP: "0.5",
    });
    expect(readdirSync(tree.state)).toEqual([]);
    expect(existsSync(join(tree.handoff, "job1", "out"))).toBe(false);
  });

  test("a configured trainer.tokenizer_dir is the trainer's --tokenizer_cache_dir", async () => {
    using tree = makeHostTree();
    const dir = join(tree.root, "tokenizers elsewhere");
    const { code, out } = await plan(tree, tree.validRequest(), `mode = "simulate"\ntokenizer_dir = ${JSON.stringify(dir)}\n`);
    expect(code).toBe(0);
    expect(out.argv.filter((a: string) => a.startsWith("--tokenizer_cache_dir="))).toEqual([`--tokenizer_cache_dir=${dir}`]);
  });

  test("the dataset TOML holds only sd-scripts' keys and the request's values, escaped", async () => {
    using tree = makeHostTree();
    const { out } = await plan(tree, tree.validRequest({ tier: "quality", device_index: 1, subject_class: "young woman", repeats: 7 }));
    expect(Bun.TOML.parse(out.dataset_toml)).toEqual({
      general: { caption_extension: ".txt" },
      // The trainer reads the job's own copy of the dataset, never the handoff folder.
      datasets: [{ resolution: 1024, batch_size: 2, enable_bucket: true, max_bucket_reso: 2048, subsets: [{ image_dir: expect.stringMatching(/\/jobs\/[^/]+\/dataset\/images$/), class_tokens: "ohwx young woman", num_repeats: 7 }] }],
    });
    expect((Bun.TOML.parse(out.dataset_toml) as any).datasets[0].subsets[0].image_dir).toStartWith(join(tree.state, "jobs"));
    expect(out.argv).toContain("--max_train_steps=3000");
    expect(out.env.CUDA_VISIBLE_DEVICES).toBe("1");
  });

  test("the batch is the tier's, whichever card runs it: fast trains batch 1 on the 48 GB card too", async () => {
    using tree = makeHostTree();
    const batchOf = async (overrides: Record<string, unknown>) =>
      (Bun.TOML.parse((await plan(tree, tree.validRequest(overrides))).out.dataset_toml) as any).datasets[0].batch_size;
    expect(await batchOf({ tier: "fast", device_index: 0 })).toBe(1);
    expect(await batchOf({ tier: "fast", device_index: 1 })).toBe(1);
    expect(await batchOf({ tier: "balanced", device_index: 1 })).toBe(1);
    // Contrast: the quality tier trains batch 2 (it runs on the 48 GB card only).
    expect(await batchOf({ tier: "quality", device_index: 1 })).toBe(2);
  });

  // Request paths may not hold such characters (see the hostile catalog); a kohya folder inside the dataset may.
  test("an image dir with quotes, a backslash and TOML brackets stays one string value", async () => {
    using tree = makeHostTree(0);
    const odd = join(tree.dataset, '10_we"ird\\ [[datasets]] name');
    await Bun.write(join(odd, "a.png"), "x");
    const { out } = await plan(tree, tree.validRequest());
    const parsed = Bun.TOML.parse(out.dataset_toml) as any;
    expect(parsed.datasets.length).toBe(1);
    expect(parsed.datasets[0].subsets[0].image_dir).toEndWith(`/dataset/${basename(odd)}`);
  });

  test("a request the worker would refuse for its text alone (10.0 for an integer) is refused by plan too, with its other faults", async () => {
    using tree = makeHostTree();
    const text = JSON.stringify(tree.validRequest({ tier: "quality" })).replace('"repeats":2', '"repeats":10.0');
    const { code, out } = await plan(tree, text);
    expect(code).toBe(1);
    expect(out).toEqual({ detail: [
      { loc: ["body", "repeats"], msg: "must be an integer, got the number literal 10.0", type: "type_error" },
      { loc: ["body", "device_index"], msg: expect.stringContaining('tier "quality" needs a 48gb device'), type: "tier_device_mismatch" },
    ] });
    // Contrast: the same request written as an integer plans.
    expect((await plan(tree, text.replace('"repeats":10.0', '"repeats":10').replace('"device_index":0', '"device_index":1'))).code).toBe(0);
  });

  test("a bad request prints the 422 detail list and exits 1 without creating anything", async () => {
    using tree = makeHostTree();
    const { code, out } = await plan(tree, tree.validRequest({ tier: "quality", device_index: 0 }));
    expect(code).toBe(1);
    expect(out).toEqual({ detail: [{ loc: ["body", "device_index"], msg: expect.stringContaining('tier "quality" needs a 48gb device'), type: "tier_device_mismatch" }] });
    expect(readdirSync(tree.state)).toEqual([]);
  });
});
