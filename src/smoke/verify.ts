import { PNG_SIGNATURE } from "../png.ts";
import { verifySafetensors } from "../safetensors/verify.ts";

// What a LoRA of sd-scripts' networks.lora says of itself in its safetensors metadata (train_network.py).
const LORA_METADATA = ["ss_network_module", "ss_network_dim", "ss_network_alpha", "ss_output_name", "ss_steps"];

interface LoraExpectation {
  path: string;
  sha256: string;
  networkDim: number;
}

/** Null when the file is the record's (same digest), whole, finite and tagged by sd-scripts; else what is not. */
export async function loraProblem(want: LoraExpectation): Promise<string | null> {
  const verdict = await verifySafetensors(want.path);
  if (!verdict.ok) return `${want.path}: ${verdict.error.detail}`;
  const { sha256, nonFinite, metadata } = verdict.value;
  if (sha256 !== want.sha256) return `${want.path} has sha256 ${sha256}, not the record's ${want.sha256}`;
  if (nonFinite.tensors > 0) return `${want.path} holds ${nonFinite.tensors} tensor(s) with NaN or Inf`;
  const missing = LORA_METADATA.filter((key) => metadata[key] === undefined);
  if (missing.length > 0) return `${want.path} lacks sd-scripts' metadata ${missing.join(", ")}`;
  if (metadata.ss_network_module !== "networks.lora" || metadata.ss_network_dim !== String(want.networkDim)) {
    const said = `${metadata.ss_network_module} rank ${metadata.ss_network_dim}`;
    return `${want.path} is ${said}, not networks.lora rank ${want.networkDim}`;
  }
  return null;
}

const IHDR_END = 8 + 8 + 13;

/** The size of a PNG whose signature, leading IHDR and closing IEND are in place; else what is wrong. */
export function pngSize(bytes: Uint8Array): { width: number; height: number } | string {
  if (bytes.length < IHDR_END + 12 || PNG_SIGNATURE.some((b, i) => bytes[i] !== b)) return "not a PNG file";
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const type = (at: number) => new TextDecoder().decode(bytes.subarray(at, at + 4));
  if (type(12) !== "IHDR") return "a PNG without its IHDR chunk first";
  if (type(bytes.length - 8) !== "IEND") return "a PNG cut short (no IEND chunk at its end)";
  const size = { width: view.getUint32(16), height: view.getUint32(20) };
  return size.width > 0 && size.height > 0 ? size : "a PNG of no pixels";
}
