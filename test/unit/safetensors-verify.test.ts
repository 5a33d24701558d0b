import { afterAll, describe, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, rmSync, truncateSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { verifySafetensors } from "../../src/safetensors/verify.ts";

const dir = mkdtempSync(join(tmpdir(), "safetensors-verify-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

let fileCounter = 0;

async function writeBytes(bytes: Uint8Array): Promise<string> {
  const path = join(dir, `file-${fileCounter++}.safetensors`);
  await Bun.write(path, bytes);
  return path;
}

function concat(...parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((sum, part) => sum + part.byteLength, 0));
  let offset = 0;
  for (const part of parts) {
    out.set(part, offset);
    offset += part.byteLength;
  }
  return out;
}

function lengthPrefix(length: number): Uint8Array {
  const prefix = new Uint8Array(8);
  new DataView(prefix.buffer).setBigUint64(0, BigInt(length), true);
  return prefix;
}

// Encodes a file the way a safetensors writer would: LE u64 length, header bytes, data area.
function encodeFile(header: unknown, data: Uint8Array): Uint8Array {
  return encodeRawHeader(new TextEncoder().encode(JSON.stringify(header)), data);
}

function encodeRawHeader(headerBytes: Uint8Array, data: Uint8Array): Uint8Array {
  return concat(lengthPrefix(headerBytes.byteLength), headerBytes, data);
}

function sha256(bytes: Uint8Array): string {
  return new Bun.CryptoHasher("sha256").update(bytes).digest("hex");
}

const metadata = { ss_network_dim: "16", ss_output_name: "person" };
// 2x3 F16 = 12 bytes, then 4 F32 = 16 bytes, then 1 U8: 29 data bytes tiled without gaps.
const validHeader = {
  __metadata__: metadata,
  "lora_unet.down.weight": { dtype: "F16", shape: [2, 3], data_offsets: [0, 12] },
  "lora_unet.alpha": { dtype: "F32", shape: [4], data_offsets: [12, 28] },
  "lora_unet.flag": { dtype: "U8", shape: [], data_offsets: [28, 29] },
};
const validData = Uint8Array.from({ length: 29 }, (_, index) => index);

function withTensors(tensors: Record<string, unknown>): Record<string, unknown> {
  return { __metadata__: metadata, ...tensors };
}

async function verdictFor(header: unknown, data: Uint8Array) {
  return verifySafetensors(await writeBytes(encodeFile(header, data)));
}

describe("verifySafetensors", () => {
  test("a complete file with metadata and tensors of several dtypes is ok, with its size and sha256", async () => {
    const bytes = encodeFile(validHeader, validData);
    const verdict = await verifySafetensors(await writeBytes(bytes));
    expect(verdict).toEqual({
      ok: true,
      value: { bytes: bytes.byteLength, sha256: sha256(bytes), tensorCount: 3, metadata, nonFinite: { tensors: 0, names: [] } },
    });
  });

  test("the sha256 of a file larger than one read chunk covers every byte", async () => {
    const floats = 1024 * 1024;
    const data = Uint8Array.from({ length: floats * 4 }, (_, index) => index % 251);
    const bytes = encodeFile(withTensors({ big: { dtype: "F32", shape: [floats], data_offsets: [0, floats * 4] } }), data);
    const verdict = await verifySafetensors(await writeBytes(bytes));
    expect(verdict).toEqual({
      ok: true,
      value: { bytes: bytes.byteLength, sha256: sha256(bytes), tensorCount: 1, metadata, nonFinite: { tensors: 0, names: [] } },
    });
  });

  test("tensors listed out of offset order still tile the data area", async () => {
    const verdict = await verdictFor(
      withTensors({
        b: { dtype: "BF16", shape: [2], data_offsets: [4, 8] },
        a: { dtype: "I32", shape: [1], data_offsets: [0, 4] },
      }),
      new Uint8Array(8),
    );
    expect(verdict.ok).toBe(true);
  });

  test("a file cut one byte short is invalid", async () => {
    const bytes = encodeFile(validHeader, validData);
    const verdict = await verifySafetensors(await writeBytes(bytes.subarray(0, bytes.byteLength - 1)));
    expect(verdict).toEqual({
      ok: false,
      error: { reason: "invalid", detail: "tensors end at data byte 29 but the data area holds only 28 bytes" },
    });
  });

  test("one trailing byte after the last tensor is invalid", async () => {
    const bytes = concat(encodeFile(validHeader, validData), new Uint8Array([0]));
    expect(await verifySafetensors(await writeBytes(bytes))).toEqual({
      ok: false,
      error: { reason: "invalid", detail: "data area holds 1 bytes after the last tensor ends at 29" },
    });
  });

  test("a gap between two tensors is invalid", async () => {
    const verdict = await verdictFor(
      withTensors({
        a: { dtype: "F32", shape: [1], data_offsets: [0, 4] },
        b: { dtype: "F32", shape: [1], data_offsets: [6, 10] },
      }),
      new Uint8Array(10),
    );
    expect(verdict).toEqual({
      ok: false,
      error: { reason: "invalid", detail: "data bytes 4..6 before tensor 'b' belong to no tensor" },
    });
  });

  test("a data area that does not start with a tensor is invalid", async () => {
    const verdict = await verdictFor(withTensors({ a: { dtype: "U8", shape: [2], data_offsets: [1, 3] } }), new Uint8Array(3));
    expect(verdict).toEqual({ ok: false, error: { reason: "invalid", detail: "data bytes 0..1 before tensor 'a' belong to no tensor" } });
  });

  test("two tensors sharing bytes is invalid", async () => {
    const verdict = await verdictFor(
      withTensors({
        a: { dtype: "F32", shape: [2], data_offsets: [0, 8] },
        b: { dtype: "F32", shape: [1], data_offsets: [4, 8] },
      }),
      new Uint8Array(8),
    );
    expect(verdict).toEqual({
      ok: false,
      error: { reason: "invalid", detail: "tensor 'b' starts at data byte 4, inside tensor 'a' which ends at 8" },
    });
  });

  test("a byte range that does not match dtype and shape is invalid", async () => {
    const verdict = await verdictFor(withTensors({ a: { dtype: "F16", shape: [2, 3], data_offsets: [0, 6] } }), new Uint8Array(6));
    expect(verdict).toEqual({ ok: false, error: { reason: "invalid", detail: "tensor 'a' spans 6 bytes but F16 [2,3] needs 12" } });
  });

  test("a header length larger than the file is invalid", async () => {
    const bytes = concat(lengthPrefix(912), new TextEncoder().encode("{}"), new Uint8Array(30));
    expect(await verifySafetensors(await writeBytes(bytes))).toEqual({
      ok: false,
      error: { reason: "invalid", detail: "header length 912 exceeds file size 40" },
    });
  });

  test("a header length beyond the sanity limit is invalid even when the file is that large", async () => {
    const claimed = 100 * 1024 * 1024 + 1;
    const path = await writeBytes(lengthPrefix(claimed));
    // A sparse extension: the file is large on paper without writing 100 MiB.
    truncateSync(path, claimed + 8);
    expect(await verifySafetensors(path)).toEqual({
      ok: false,
      error: { reason: "invalid", detail: `header length ${claimed} exceeds the 104857600-byte limit` },
    });
  });

  test("a file shorter than the length prefix is invalid", async () => {
    expect(await verifySafetensors(await writeBytes(new Uint8Array(5)))).toEqual({
      ok: false,
      error: { reason: "invalid", detail: "file is 5 bytes, shorter than the 8-byte header length" },
    });
  });

  test("a header that is not JSON is invalid", async () => {
    const verdict = await verifySafetensors(await writeBytes(encodeRawHeader(new TextEncoder().encode("{not json"), new Uint8Array())));
    expect(verdict).toEqual({ ok: false, error: { reason: "invalid", detail: "header is not valid JSON" } });
  });

  test("a header that is not UTF-8 is invalid", async () => {
    const verdict = await verifySafetensors(await writeBytes(encodeRawHeader(new Uint8Array([0x7b, 0xff, 0x7d]), new Uint8Array())));
    expect(verdict).toEqual({ ok: false, error: { reason: "invalid", detail: "header is not valid UTF-8" } });
  });

  test("a header that is a JSON array is invalid", async () => {
    expect(await verdictFor([validHeader], validData)).toEqual({
      ok: false,
      error: { reason: "invalid", detail: "header is a JSON array, not a JSON object" },
    });
  });

  test("an unknown dtype is invalid", async () => {
    const verdict = await verdictFor(withTensors({ a: { dtype: "F4", shape: [2], data_offsets: [0, 1] } }), new Uint8Array(1));
    expect(verdict).toEqual({ ok: false, error: { reason: "invalid", detail: `tensor 'a' has unknown dtype "F4"` } });
  });

  test("a negative dimension in a shape is invalid", async () => {
    const verdict = await verdictFor(withTensors({ a: { dtype: "U8", shape: [-1], data_offsets: [0, 1] } }), new Uint8Array(1));
    expect(verdict).toEqual({
      ok: false,
      error: { reason: "invalid", detail: "tensor 'a' has shape [-1]; expected an array of non-negative integers" },
    });
  });

  test("metadata with a non-string value is invalid", async () => {
    const verdict = await verdictFor({ ...validHeader, __metadata__: { ss_network_dim: 16 } }, validData);
    expect(verdict).toEqual({
      ok: false,
      error: { reason: "invalid", detail: "__metadata__ value for key 'ss_network_dim' is a number, not a string" },
    });
  });

  test("a file with no tensors is invalid because a LoRA without weights is useless", async () => {
    expect(await verdictFor({ __metadata__: metadata }, new Uint8Array())).toEqual({
      ok: false,
      error: { reason: "invalid", detail: "no tensors" },
    });
  });

  test("an absent file is missing", async () => {
    const path = join(dir, "never-written.safetensors");
    expect(await verifySafetensors(path)).toEqual({ ok: false, error: { reason: "missing", detail: `no file at ${path}` } });
  });

  test("a directory in place of the file is invalid, not missing", async () => {
    const path = join(dir, "a-directory.safetensors");
    mkdirSync(path);
    expect(await verifySafetensors(path)).toEqual({
      ok: false,
      error: { reason: "invalid", detail: `${path} is a directory, not a regular file` },
    });
  });
});
