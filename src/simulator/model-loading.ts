// sd-scripts loading the SDXL base model (library/sdxl_train_util.py): a file loads as a
// StableDiffusion checkpoint; anything else goes to diffusers as a repo id, which an absolute
// path can never be.
import { stat } from "node:fs/promises";
import type { Io } from "./io.ts";
import type { Log } from "./logger.ts";
import { missingModelTraceback } from "./python-errors.ts";

const CHECKPOINT_LINES = [
  "building U-Net",
  "loading U-Net from checkpoint",
  "U-Net: <All keys matched successfully>",
  "building text encoders",
  "loading text encoders from checkpoint",
  "text encoder 1: <All keys matched successfully>",
  "text encoder 2: <All keys matched successfully>",
  "building VAE",
  "loading VAE from checkpoint",
  "VAE: <All keys matched successfully>",
];

export interface ModelLoad {
  io: Io;
  log: Log;
  modelPath: string;
  mixedPrecision: string;
  sdpa: boolean;
  scriptDir: string;
  seconds: number;
}

// False when loading failed; the traceback is already on stderr.
export async function loadModel({ io, log, modelPath, mixedPrecision, sdpa, scriptDir, seconds }: ModelLoad): Promise<boolean> {
  log("INFO", "preparing accelerator");
  log("INFO", "loading model for process 0/1");
  if (!(await isFile(modelPath))) {
    log("INFO", `load Diffusers pretrained models: ${modelPath}, variant=${mixedPrecision === "fp16" ? "fp16" : "None"}`);
    io.stderr(missingModelTraceback(scriptDir, modelPath));
    return false;
  }
  log("INFO", `load StableDiffusion checkpoint: ${modelPath}`);
  await io.sleep(seconds);
  for (const line of CHECKPOINT_LINES) log("INFO", line);
  if (sdpa) log("INFO", "Enable SDPA for U-Net");
  return true;
}

async function isFile(path: string): Promise<boolean> {
  try {
    return (await stat(path)).isFile();
  } catch {
    return false;
  }
}
