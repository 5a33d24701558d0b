// Issue 12 item 5: what the finite-weights scan adds to verifying a saved LoRA. The file: a dim-32 SDXL LoRA
// as sd-scripts names it (U-Net attention and feed-forward modules plus both text encoders'), F16, ~230 MB.
// Baselines, interleaved in the same run over the same file: reading it; sha256 over the same reads (verify
// minus it is the scan); and sha256 as verifySafetensors did it before the scan. Warm page cache for all:
// this is CPU cost, not disk speed.
import { mkdtempSync, rmSync } from "node:fs";
import { open } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { verifySafetensors } from "../src/safetensors/verify.ts";
import { writeSafetensors, type Tensor } from "../src/safetensors/write.ts";
import { trackScratch } from "./lib/cleanup.ts";
import { runBench, verdict, type Row } from "./lib/report.ts";
import { median, mib, ms, ratio } from "./lib/stats.ts";

const RANK = 32;
const ROUNDS = 5;
const CHUNK = 4 * 2 ** 20;
const TARGET_RATIO = 1.5;

// [kohya module name, in features, out features]
function sdxlLoraModules(): Array<[string, number, number]> {
  const modules: Array<[string, number, number]> = [];
  const block = (prefix: string, c: number) => {
    for (const m of ["attn1_to_q", "attn1_to_k", "attn1_to_v", "attn1_to_out_0", "attn2_to_q", "attn2_to_out_0"]) modules.push([`${prefix}_${m}`, c, c]);
    modules.push([`${prefix}_attn2_to_k`, 2048, c], [`${prefix}_attn2_to_v`, 2048, c], [`${prefix}_ff_net_0_proj`, c, 8 * c], [`${prefix}_ff_net_2`, 4 * c, c]);
  };
  const transformer = (prefix: string, c: number, depth: number) => {
    modules.push([`${prefix}_proj_in`, c, c], [`${prefix}_proj_out`, c, c]);
    for (let b = 0; b < depth; b++) block(`${prefix}_transformer_blocks_${b}`, c);
  };
  for (const i of [4, 5]) transformer(`lora_unet_input_blocks_${i}_1`, 640, 2);
  for (const i of [7, 8]) transformer(`lora_unet_input_blocks_${i}_1`, 1280, 10);
  transformer("lora_unet_middle_block_1", 1280, 10);
  for (const i of [0, 1, 2]) transformer(`lora_unet_output_blocks_${i}_1`, 1280, 10);
  for (const i of [3, 4, 5]) transformer(`lora_unet_output_blocks_${i}_1`, 640, 2);
  const encoder = (prefix: string, layers: number, c: number) => {
    for (let l = 0; l < layers; l++) {
      for (const p of ["q_proj", "k_proj", "v_proj", "out_proj"]) modules.push([`${prefix}_${l}_self_attn_${p}`, c, c]);
      modules.push([`${prefix}_${l}_mlp_fc1`, c, 4 * c], [`${prefix}_${l}_mlp_fc2`, 4 * c, c]);
    }
  };
  encoder("lora_te1_text_model_encoder_layers", 12, 768);
  encoder("lora_te2_text_model_encoder_layers", 32, 1280);
  return modules;
}

// Random F16 with the exponent's top bit cleared: every value finite and below 2 in magnitude, like trained weights.
function weightPool(): Uint16Array {
  const pool = new Uint16Array(CHUNK / 2);
  for (let at = 0; at < pool.length; at += 32768) crypto.getRandomValues(pool.subarray(at, at + 32768));
  for (let i = 0; i < pool.length; i++) pool[i]! &= 0xbfff;
  return pool;
}

function f16(pool: Uint16Array, count: number): Uint8Array {
  const data = new Uint16Array(count);
  for (let at = 0; at < count; at += pool.length) data.set(pool.subarray(0, Math.min(pool.length, count - at)), at);
  return new Uint8Array(data.buffer);
}

function loraTensors(): Tensor[] {
  const pool = weightPool();
  return sdxlLoraModules().flatMap(([name, inputs, outputs]): Tensor[] => [
    { name: `${name}.alpha`, dtype: "F16", shape: [], data: new Uint8Array(new Uint16Array([0x4c00]).buffer) },
    { name: `${name}.lora_down.weight`, dtype: "F16", shape: [RANK, inputs], data: f16(pool, RANK * inputs) },
    { name: `${name}.lora_up.weight`, dtype: "F16", shape: [outputs, RANK], data: f16(pool, outputs * RANK) },
  ]);
}

// The same 4 MiB positioned reads verifySafetensors makes, optionally through sha256: what the scan adds is
// verify minus hashed reads.
async function readAll(path: string, hasher: Bun.CryptoHasher | null): Promise<number> {
  const buffer = new Uint8Array(CHUNK);
  const file = await open(path, "r");
  let total = 0;
  try {
    for (let n; (n = (await file.read(buffer, 0, CHUNK, total)).bytesRead) > 0; total += n) hasher?.update(buffer.subarray(0, n));
  } finally {
    await file.close();
  }
  return total;
}

async function sha256Reads(path: string): Promise<string> {
  const hasher = new Bun.CryptoHasher("sha256");
  await readAll(path, hasher);
  return hasher.digest("hex");
}

// How verifySafetensors hashed before it scanned: Bun.file(path).stream() through sha256.
async function sha256Stream(path: string): Promise<string> {
  const hasher = new Bun.CryptoHasher("sha256");
  for await (const chunk of Bun.file(path).stream()) hasher.update(chunk);
  return hasher.digest("hex");
}

async function timed<T>(run: () => Promise<T>): Promise<{ ms: number; value: T }> {
  const t0 = performance.now();
  const value = await run();
  return { ms: performance.now() - t0, value };
}

export async function measure(): Promise<Row[]> {
  const dir = mkdtempSync(join(tmpdir(), "lora-worker-bench-finite-"));
  const untrack = trackScratch(dir);
  try {
    const path = join(dir, "sdxl-dim32.safetensors");
    const tensors = loraTensors();
    await writeSafetensors(path, tensors, { ss_network_dim: String(RANK), ss_network_alpha: "16.0" });
    const bytes = Bun.file(path).size;
    console.log(`${tensors.length} tensors, ${mib(bytes)} F16; ${ROUNDS} rounds after one warm-up, each: read, sha256 over the same reads, sha256 as before (stream), verifySafetensors`);
    const times = { read: [] as number[], sha: [] as number[], stream: [] as number[], verify: [] as number[] };
    for (let round = 0; round <= ROUNDS; round++) {
      const read = await timed(() => readAll(path, null));
      const sha = await timed(() => sha256Reads(path));
      const stream = await timed(() => sha256Stream(path));
      const verify = await timed(() => verifySafetensors(path));
      if (read.value !== bytes) throw new Error(`read ${read.value} of ${bytes} bytes`);
      if (!verify.value.ok || verify.value.value.sha256 !== sha.value || stream.value !== sha.value || verify.value.value.nonFinite.tensors !== 0) {
        throw new Error(`verifySafetensors disagrees with the baselines: ${JSON.stringify({ ...verify.value, metadata: undefined })}`);
      }
      if (round > 0) times.read.push(read.ms), times.sha.push(sha.ms), times.stream.push(stream.ms), times.verify.push(verify.ms);
    }
    const [read, sha, stream, verify] = [median(times.read), median(times.sha), median(times.stream), median(times.verify)];
    const rate = (t: number) => `${Math.round(bytes / 2 ** 20 / (t / 1000))} MiB/s`;
    const scan = verify - sha;
    console.log(`median: read ${ms(read)} (${rate(read)}), sha256 same reads ${ms(sha)} (${rate(sha)}), sha256 as before ${ms(stream)} (${rate(stream)}), verify with scan ${ms(verify)} (${rate(verify)}); the scan itself ≈ ${ms(scan)} (${rate(scan)})`);
    const bench = "12.5 finite scan";
    return [
      { bench, metric: `verify + scan, ${mib(bytes)} LoRA`, figure: `${ms(verify)} · ${rate(verify)}`, baseline: `${ms(sha)} · ${rate(sha)} sha256 alone`, ratio: ratio(verify / sha), target: `≤ ${TARGET_RATIO}× sha256`, verdict: verdict(verify / sha, "<=", TARGET_RATIO) },
      { bench, metric: "verify + scan vs verify before the scan", figure: ms(verify), baseline: `${ms(stream)} · ${rate(stream)} sha256 of stream()`, ratio: ratio(verify / stream), target: "", verdict: "info" },
      { bench, metric: "verify + scan vs reading the file", figure: ms(verify), baseline: `${ms(read)} · ${rate(read)} read`, ratio: ratio(verify / read), target: "", verdict: "info" },
    ];
  } finally {
    untrack();
    rmSync(dir, { recursive: true, force: true });
  }
}

if (import.meta.main) await runBench("12.5 LoRA finite-weights scan", measure);
