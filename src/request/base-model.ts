import { readHeaderFile } from "../safetensors/header-file.ts";
import { checkLayout } from "../safetensors/layout.ts";
import { describeNonSdxl, SDXL_PARTS } from "./checkpoint-kind.ts";

export type BaseModelCheck = { ok: true } | { ok: false; msg: string; type: string };

const PREFIXES = SDXL_PARTS.map((p) => p.prefix);
const NEEDED = `base_model_path must be one original-format SDXL checkpoint with ${PREFIXES.slice(0, -1).join(", ")} and ${PREFIXES.at(-1)} keys`;

// Reads the header only (a few hundred KiB of a multi-GB file), so an SD 1.x checkpoint or a truncated copy
// is refused at POST /train instead of a minute into loading. `sent` names the file in messages, `real` is read.
export async function checkBaseModelHeader(sent: string, real: string, size: number): Promise<BaseModelCheck> {
  let read: Awaited<ReturnType<typeof readHeaderFile>>;
  try {
    read = await readHeaderFile(real, size);
  } catch (error) {
    return { ok: false, msg: `${sent} cannot be read (${(error as NodeJS.ErrnoException).code ?? "error"})`, type: "path_unreadable" };
  }
  if (!read.ok) return incomplete(sent, read.detail);
  const layoutProblem = checkLayout(read.header.tensors, read.dataBytes);
  if (layoutProblem !== null) return incomplete(sent, layoutProblem);
  const notSdxl = describeNonSdxl(read.header.tensors.map((t) => t.name));
  if (notSdxl !== null) return { ok: false, msg: `${sent} ${notSdxl}; ${NEEDED}`, type: "not_sdxl_checkpoint" };
  return { ok: true };
}

function incomplete(sent: string, detail: string): BaseModelCheck {
  return { ok: false, msg: `${sent} is not a complete safetensors file: ${detail}`, type: "safetensors_invalid" };
}
