import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { READ_CHUNK_BYTES, verifySafetensors } from "../../src/safetensors/verify.ts";
import { writeSafetensors, type Dtype, type Tensor } from "../../src/safetensors/write.ts";

const dir = mkdtempSync(join(tmpdir(), "safetensors-non-finite-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

let fileCounter = 0;
const nextPath = () => join(dir, `lora-${fileCounter++}.safetensors`);

const BYTES: Record<Dtype, number> = { F16: 2, BF16: 2, F32: 4, F64: 8 };

// Little-endian encodings, as safetensors stores them; BF16 is the top half of an F32.
function encode(dtype: Dtype, values: readonly number[]): Uint8Array {
  const bytes = new Uint8Array(values.length * BYTES[dtype]);
  const view = new DataView(bytes.buffer);
  const scratch = new DataView(new ArrayBuffer(4));
  values.forEach((value, i) => {
    if (dtype === "F16") view.setFloat16(i * 2, value, true);
    else if (dtype === "F32") view.setFloat32(i * 4, value, true);
    else if (dtype === "F64") view.setFloat64(i * 8, value, true);
    else view.setUint16(i * 2, (scratch.setFloat32(0, value), scratch.getUint32(0) >>> 16), true);
  });
  return bytes;
}

function tensor(name: string, dtype: Dtype, values: readonly number[]): Tensor {
  return { name, dtype, shape: [values.length], data: encode(dtype, values) };
}

// A LoRA module's three tensors, with weights a trained LoRA could hold, including each dtype's extremes.
function finiteModule(prefix: string, dtype: Dtype): Tensor[] {
  const extremes = dtype === "F16" ? [65504, -65504, 2 ** -24, -0] : dtype === "F64" ? [Number.MAX_VALUE, -Number.MIN_VALUE] : [3.3e38, -3.3e38, 1e-40, -0];
  return [
    tensor(`${prefix}.alpha`, dtype, [16]),
    tensor(`${prefix}.lora_down.weight`, dtype, [0.012, -0.3, ...extremes, 1, 0]),
    tensor(`${prefix}.lora_up.weight`, dtype, [0.0001, -0.0002, 0, 0.5]),
  ];
}

function poisoned(tensors: Tensor[], name: string, index: number, value: number): Tensor[] {
  return tensors.map((t) => {
    if (t.name !== name) return t;
    const data = t.data.slice();
    data.set(encode(t.dtype, [value]), index * BYTES[t.dtype]);
    return { ...t, data };
  });
}

async function verdictOf(tensors: Tensor[]) {
  const path = nextPath();
  await writeSafetensors(path, tensors, { ss_network_dim: "16" });
  const verdict = await verifySafetensors(path);
  if (!verdict.ok) throw new Error(`expected a valid file, got ${JSON.stringify(verdict)}`);
  return { verdict: verdict.value, bytes: new Uint8Array(await Bun.file(path).arrayBuffer()) };
}

const MODULES = [
  ...finiteModule("lora_unet_input_blocks_4_1_transformer_blocks_0_attn1_to_q", "F16"),
  ...finiteModule("lora_unet_input_blocks_4_1_transformer_blocks_0_attn1_to_k", "BF16"),
  ...finiteModule("lora_unet_input_blocks_4_1_transformer_blocks_0_attn2_to_k", "F32"),
];
const F16_DOWN = "lora_unet_input_blocks_4_1_transformer_blocks_0_attn1_to_q.lora_down.weight";
const BF16_UP = "lora_unet_input_blocks_4_1_transformer_blocks_0_attn1_to_k.lora_up.weight";
const F32_DOWN = "lora_unet_input_blocks_4_1_transformer_blocks_0_attn2_to_k.lora_down.weight";

describe("verifySafetensors counts the float tensors that hold a NaN or ±Inf", () => {
  test("a finite LoRA of F16, BF16 and F32 tensors, their largest and smallest values among them, shows none", async () => {
    const { verdict, bytes } = await verdictOf(MODULES);
    expect(verdict.nonFinite).toEqual({ tensors: 0, names: [] });
    expect(verdict.sha256).toBe(new Bun.CryptoHasher("sha256").update(bytes).digest("hex"));
  });

  test("one NaN in an F16 tensor, one +Inf in a BF16 tensor and one NaN in an F32 tensor are counted and named", async () => {
    let tensors = poisoned(MODULES, F16_DOWN, 3, Number.NaN);
    tensors = poisoned(tensors, BF16_UP, 0, Number.POSITIVE_INFINITY);
    tensors = poisoned(tensors, F32_DOWN, 7, Number.NaN);
    const { verdict, bytes } = await verdictOf(tensors);
    expect(verdict.nonFinite).toEqual({ tensors: 3, names: [F16_DOWN, BF16_UP, F32_DOWN] });
    expect(verdict.sha256).toBe(new Bun.CryptoHasher("sha256").update(bytes).digest("hex"));
    expect(verdict.tensorCount).toBe(9);
  });

  test("-Inf in F16 and NaN in F64 count too; an F16 tensor starting half way through a 32-bit word is scanned at its edges", async () => {
    // alpha (2 bytes) puts every later F16 tensor off 4-byte alignment: its first and last elements are edge cases.
    const tensors = [tensor("a.alpha", "F16", [8]), tensor("a.lora_down.weight", "F16", [Number.NEGATIVE_INFINITY, 1, 2]), tensor("b.lora_up.weight", "F16", [1, 2, 3, Number.NaN])];
    const edges = await verdictOf(tensors);
    expect(edges.verdict.nonFinite).toEqual({ tensors: 2, names: ["a.lora_down.weight", "b.lora_up.weight"] });
    const f64 = await verdictOf([tensor("c.weight", "F64", [1, Number.NaN, 2])]);
    expect(f64.verdict.nonFinite).toEqual({ tensors: 1, names: ["c.weight"] });
  });

  test("seven bad tensors are all counted, and the first five in file order are named", async () => {
    const tensors = Array.from({ length: 7 }, (_, i) => tensor(`bad${i}.weight`, "F16", [1, Number.NaN]));
    const { verdict } = await verdictOf([tensor("good.weight", "F16", [1]), ...tensors]);
    expect(verdict.nonFinite).toEqual({ tensors: 7, names: ["bad0.weight", "bad1.weight", "bad2.weight", "bad3.weight", "bad4.weight"] });
  });
});

// A file built by hand: header length chosen so the data area starts at an odd offset, as no padding writer would.
function unalignedFile(entries: Record<string, { dtype: string; data: Uint8Array }>): { bytes: Uint8Array; dataStart: number } {
  const header: Record<string, unknown> = {};
  let offset = 0;
  for (const [name, { dtype, data }] of Object.entries(entries)) {
    const width = dtype === "I32" || dtype === "F32" ? 4 : dtype === "U8" || dtype === "F8_E4M3" ? 1 : 2;
    header[name] = { dtype, shape: [data.byteLength / width], data_offsets: [offset, offset + data.byteLength] };
    offset += data.byteLength;
  }
  let json = JSON.stringify(header);
  if ((8 + json.length) % 2 === 0) json += " ";
  const prefix = new Uint8Array(8);
  new DataView(prefix.buffer).setBigUint64(0, BigInt(json.length), true);
  const bytes = new Uint8Array(8 + json.length + offset);
  bytes.set(prefix);
  bytes.set(new TextEncoder().encode(json), 8);
  let at = 8 + json.length;
  for (const { data } of Object.values(entries)) bytes.set(data, at), (at += data.byteLength);
  return { bytes, dataStart: 8 + json.length };
}

async function nonFiniteOf(bytes: Uint8Array) {
  const path = nextPath();
  await Bun.write(path, bytes);
  const verdict = await verifySafetensors(path);
  if (!verdict.ok) throw new Error(`expected a valid file, got ${JSON.stringify(verdict)}`);
  return verdict.value.nonFinite;
}

describe("the scan across read chunks and odd offsets", () => {
  // A BF16 tensor whose element at `index` has its low byte ending one read chunk and its high byte starting the next.
  function straddlingBf16(value: number) {
    const elements = READ_CHUNK_BYTES / 2 + 64;
    const probe = unalignedFile({ w: { dtype: "BF16", data: new Uint8Array(elements * 2) } });
    const index = (READ_CHUNK_BYTES - 1 - probe.dataStart) / 2;
    const data = encode("BF16", Array.from({ length: elements }, (_, i) => (i === index ? value : 0.25)));
    return unalignedFile({ w: { dtype: "BF16", data } }).bytes;
  }

  test("a BF16 +Inf split across two read chunks of an unaligned file is found", async () => {
    expect(await nonFiniteOf(straddlingBf16(Number.POSITIVE_INFINITY))).toEqual({ tensors: 1, names: ["w"] });
  });

  test("the largest finite BF16 split the same way is not (the contrast: only the low byte differs)", async () => {
    expect(await nonFiniteOf(straddlingBf16(3.3e38))).toEqual({ tensors: 0, names: [] });
  });

  test("an F32 NaN in the last element of a tensor spanning three aligned chunks is found", async () => {
    const elements = (READ_CHUNK_BYTES * 5) / 8;
    const values = Array.from({ length: elements }, (_, i) => (i === elements - 1 ? Number.NaN : i / elements));
    const { verdict } = await verdictOf([tensor("big.weight", "F32", values)]);
    expect(verdict.nonFinite).toEqual({ tensors: 1, names: ["big.weight"] });
  });

  test("integer and F8 tensors are not scanned, even holding a float's NaN bit pattern", async () => {
    const nanF32 = encode("F32", [Number.NaN]);
    const { bytes } = unalignedFile({
      ids: { dtype: "I32", data: nanF32 },
      flags: { dtype: "U8", data: new Uint8Array([0xff, 0xff]) },
      scales: { dtype: "F8_E4M3", data: new Uint8Array([0x7f, 0xff]) },
      weight: { dtype: "F32", data: nanF32 },
    });
    expect(await nonFiniteOf(bytes)).toEqual({ tensors: 1, names: ["weight"] });
  });
});
