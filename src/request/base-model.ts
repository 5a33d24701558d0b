import { sha256Hex, statOrNull } from "../fs.ts";
import { fail, ok, type Result } from "../result.ts";
import { checkLayout, LENGTH_PREFIX_BYTES, MAX_HEADER_BYTES, readHeaderFile } from "../safetensors/header.ts";
import type { Problem } from "./schema.ts";

// What sd-scripts' SDXL trainer can load, told apart by tensor names alone. Confirmed in kohya-ss/sd-scripts
// (commit 06e8980, library/sdxl_model_util.py, load_models_from_sdxl_checkpoint): one original-format
// checkpoint is split by key prefix: `model.diffusion_model.` into the U-Net,
// `conditioner.embedders.0.transformer.` into CLIP-L, `conditioner.embedders.1.model.` into OpenCLIP bigG
// (convert_sdxl_text_encoder_2_checkpoint), and what is left goes to library/model_util.py's
// convert_ldm_vae_checkpoint, which takes the `first_stage_model.` keys.
// A part with no keys fails minutes later in _load_state_dict_on_device ("Error(s) in loading state_dict").
const SDXL_PARTS: ReadonlyArray<{ prefix: string; part: string }> = [
  { prefix: "model.diffusion_model.", part: "U-Net" },
  { prefix: "conditioner.embedders.0.transformer.", part: "CLIP-L text encoder" },
  { prefix: "conditioner.embedders.1.model.", part: "OpenCLIP bigG text encoder" },
  { prefix: "first_stage_model.", part: "VAE" },
];

const VAE_ALONE = ["encoder.", "decoder.", "quant_conv.", "post_quant_conv."];

interface Shape {
  is: (names: readonly string[]) => boolean;
  found: string;
}

// Ordered: the first that fits names the file. Each says what was found and which SDXL part is absent.
const KNOWN_SHAPES: readonly Shape[] = [
  {
    is: some((n) => n.startsWith("lora_unet_") || n.startsWith("lora_te")),
    found: "is a LoRA, not a checkpoint: lora_unet_ and lora_te keys",
  },
  { is: some((n) => n.includes("double_blocks.")), found: "is a FLUX model: double_blocks. keys, no conditioner." },
  {
    is: some((n) => n.startsWith("cond_stage_model.transformer.")),
    found: "is an SD 1.x checkpoint: cond_stage_model.transformer. keys, no conditioner.",
  },
  {
    is: some((n) => n.startsWith("cond_stage_model.model.")),
    found: "is an SD 2.x checkpoint: cond_stage_model.model. keys, no conditioner.",
  },
  {
    is: some((n) => n.startsWith("conditioner.embedders.0.model.")),
    found:
      "is an SDXL refiner checkpoint: conditioner.embedders.0.model. keys (OpenCLIP bigG alone), " +
      "no conditioner.embedders.0.transformer. (CLIP-L)",
  },
  {
    is: some((n) => n.startsWith("down_blocks.") || n.startsWith("mid_block.") || n.startsWith("up_blocks.")),
    found:
      "is a diffusers-format file: down_blocks., mid_block. and up_blocks. keys, " +
      "no model.diffusion_model. or first_stage_model.",
  },
  {
    is: (names) => names.every((n) => VAE_ALONE.some((p) => n.startsWith(p))),
    found: "is a VAE on its own: encoder. and decoder. keys, no model.diffusion_model.",
  },
  {
    is: (names) =>
      has(names, "model.diffusion_model.") && !has(names, "conditioner.") && !has(names, "first_stage_model."),
    found: "is a U-Net on its own: model.diffusion_model. keys, no conditioner. or first_stage_model.",
  },
];

// null: every SDXL part is there. Otherwise what the file is, as a phrase that follows its path.
function describeNonSdxl(names: readonly string[]): string | null {
  const missing = SDXL_PARTS.filter(({ prefix }) => !has(names, prefix));
  if (missing.length === 0) return null;
  const known = KNOWN_SHAPES.find((shape) => shape.is(names));
  if (known) return known.found;
  return `is not an SDXL checkpoint: no ${missing.map(({ prefix, part }) => `${prefix} (${part})`).join(", no ")}`;
}

function has(names: readonly string[], prefix: string): boolean {
  return names.some((n) => n.startsWith(prefix));
}

function some(test: (name: string) => boolean): (names: readonly string[]) => boolean {
  return (names) => names.some(test);
}

const PREFIXES = SDXL_PARTS.map((p) => p.prefix);
const NEEDED =
  "base_model_path must be one original-format SDXL checkpoint with " +
  `${PREFIXES.slice(0, -1).join(", ")} and ${PREFIXES.at(-1)} keys`;

// Reads the header only (a few hundred KiB of a multi-GB file), so an SD 1.x checkpoint or a truncated copy
// is refused at POST /train instead of a minute into loading. `sent` names the file in messages, `real` is read.
export async function checkBaseModelHeader(sent: string, real: string, size: number): Promise<Result<null, Problem>> {
  let read: Awaited<ReturnType<typeof readHeaderFile>>;
  try {
    read = await readHeaderFile(real, size);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code ?? "error";
    return fail({ msg: `${sent} cannot be read (${code})`, type: "path_unreadable" });
  }
  if (!read.ok) return incomplete(sent, read.error);
  const { header, dataBytes } = read.value;
  const layoutProblem = checkLayout(header.tensors, dataBytes);
  if (layoutProblem !== null) return incomplete(sent, layoutProblem);
  const notSdxl = describeNonSdxl(header.tensors.map((t) => t.name));
  if (notSdxl !== null) return fail({ msg: `${sent} ${notSdxl}; ${NEEDED}`, type: "not_sdxl_checkpoint" });
  return ok(null);
}

function incomplete(sent: string, detail: string): { ok: false; error: Problem } {
  return fail({ msg: `${sent} is not a complete safetensors file: ${detail}`, type: "safetensors_invalid" });
}

/** What the base model was when a run started: a resume refuses a file replaced since. */
export interface BaseModelPrint {
  size: number;
  mtime_ms: number;
  /** sha256 of the length prefix and the header: which tensors, of which shapes, at which offsets. */
  header_sha256: string;
}

export async function baseModelPrint(path: string): Promise<BaseModelPrint | null> {
  const info = statOrNull(path);
  if (info === null || info.size < LENGTH_PREFIX_BYTES) return null;
  const file = Bun.file(path);
  const length = new DataView(await file.slice(0, LENGTH_PREFIX_BYTES).arrayBuffer()).getBigUint64(0, true);
  // A replaced file's prefix may claim any length: no more is read than a header may hold.
  const end = Math.min(info.size, LENGTH_PREFIX_BYTES + Math.min(Number(length), MAX_HEADER_BYTES));
  const header = new Uint8Array(await file.slice(0, end).arrayBuffer());
  const digest = sha256Hex(header);
  return { size: info.size, mtime_ms: info.mtimeMs, header_sha256: digest };
}

// Null when `now` is the file `then` was; else what differs, in words.
export function baseModelChange(then: BaseModelPrint, now: BaseModelPrint | null): string | null {
  if (now === null) return "it is gone";
  if (now.size !== then.size) return `its size changed from ${then.size} to ${now.size} bytes`;
  if (now.header_sha256 !== then.header_sha256) return "its header (the tensors it holds) changed";
  if (now.mtime_ms !== then.mtime_ms) return "it was modified (its mtime changed)";
  return null;
}
