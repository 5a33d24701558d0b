import { readdirSync } from "node:fs";
import { join } from "node:path";
import { statOrNull } from "../fs.ts";
import { checkBaseModelHeader } from "../request/base-model.ts";
import { resolveInside } from "../request/contained-path.ts";
import { failed, passed, warned, type DoctorCheck, type DoctorDeps } from "./doctor.ts";
import { holdsFor } from "./service-account.ts";

const NAME = "base model";
// A model root is a folder of checkpoints, perhaps one level of sub-folders; deeper is not looked through.
const SEARCH_DEPTH = 2;
// Enough to say that there are some, and which.
const NAMED = 3;

/**
 * The SDXL checkpoint a job trains on is the operator's to bring: smoke.base_model checked as a request's
 * base_model_path is (inside a model root, an SDXL checkpoint by its header, readable by the service user), or,
 * unset, whether any model root holds a .safetensors at all.
 */
export async function checkBaseModel({ config, account, runAs, trainer }: DoctorDeps): Promise<DoctorCheck> {
  const roots = config.model_roots;
  const copy = `copy the SDXL base checkpoint (sd_xl_base_1.0.safetensors) into ${roots[0]}, ` +
    `readable by ${account.user}`;
  const place = `${copy}, and set smoke.base_model to its path so lora-worker smoke can prove the host`;
  const model = config.smoke.base_model;
  if (model === undefined) {
    const found = roots.flatMap((root) => safetensorsUnder(root, SEARCH_DEPTH));
    if (found.length === 0) {
      const none = failed(NAME, `no .safetensors in ${roots.join(", ")}: no job has a base model to name`, place);
      const why = "a simulated run loads no weights, though a request must still name an SDXL checkpoint";
      return trainer.relax(none, why);
    }
    const some = found.slice(0, NAMED).join(", ") + (found.length > NAMED ? ` and ${found.length - NAMED} more` : "");
    const unset = `smoke.base_model is unset, so lora-worker smoke is refused (409 smoke_unavailable)`;
    return warned(NAME, `${some} in the model roots; ${unset}`, `set smoke.base_model to one of them`);
  }
  const inside = resolveInside(model, { paths: roots, label: "a model root" }, false);
  const fix = `set smoke.base_model to an SDXL .safetensors inside a model root, or ${copy}`;
  if (!inside.ok) return failed(NAME, `smoke.base_model: ${inside.error.msg}`, fix);
  const st = statOrNull(inside.value);
  if (!st?.isFile()) return failed(NAME, `smoke.base_model: ${model} is not a regular file`, fix);
  if (!(await holdsFor(runAs, ["-r", inside.value]))) {
    return failed(NAME, `smoke.base_model: ${model} is not readable by ${account.user}`, `chmod o+r ${model}`);
  }
  const header = await checkBaseModelHeader(model, inside.value, st.size);
  if (!header.ok) return failed(NAME, `smoke.base_model: ${header.error.msg}`, fix);
  return passed(NAME, `smoke.base_model ${model} is an SDXL checkpoint readable by ${account.user}`);
}

function safetensorsUnder(dir: string, depth: number): string[] {
  let entries;
  try {
    entries = readdirSync(dir, { withFileTypes: true });
  } catch {
    return []; // a root that is missing or unreadable has its own line (model root)
  }
  return entries.sort((a, b) => a.name.localeCompare(b.name)).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return depth > 1 ? safetensorsUnder(path, depth - 1) : [];
    return entry.name.endsWith(".safetensors") ? [path] : [];
  });
}
