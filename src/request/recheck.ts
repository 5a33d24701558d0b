import type { Config } from "../config/schema.ts";
import { handoffRoot, modelRoots, type CheckedTrain } from "./checked-train.ts";
import { resolveInside, type Roots } from "./contained-path.ts";
import { fieldError, type DetailItem } from "./validation-error.ts";

// For the moment just before spawning: every real path the check resolved still resolves to itself inside
// its root, so a link swapped in since the request was checked is caught (time of check vs time of use).
export function recheckPaths(train: CheckedTrain, config: Config): DetailItem[] {
  const { request } = train;
  const checks: Array<[string, string, string, Roots, boolean]> = [
    ["dataset_dir", request.dataset_dir, train.imageDir, handoffRoot(config), false],
    ["base_model_path", request.base_model_path, train.baseModel, modelRoots(config), false],
    ["output_dir", request.output_dir, train.outputDir, handoffRoot(config), true],
  ];
  return checks.flatMap(([field, sent, real, roots, allowMissing]) => {
    const again = resolveInside(real, roots, allowMissing);
    if (again.ok && again.real === real) return [];
    return [fieldError(field, `${sent} changed on disk after it was checked; send the request again`, "path_changed")];
  });
}
