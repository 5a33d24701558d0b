import type { DeviceClass } from "../config/schema.ts";

// Every training constant of the recipe, in one auditable place (SPEC §4).
export const LEARNING_RATE = "1e-4";
export const LR_SCHEDULER = "cosine";
export const LR_WARMUP_STEPS = 0;
export const OPTIMIZER = "AdamW8bit";
export const MIN_SNR_GAMMA = 5;
export const NOISE_OFFSET = 0.1;
export const MIXED_PRECISION = "bf16";
export const SAVE_PRECISION = "fp16";
export const NETWORK_MODULE = "networks.lora";
export const CAPTION_EXTENSION = ".txt";
export const DATA_LOADER_WORKERS = 1;

// Alpha at half the rank keeps the LoRA's effective scale at 0.5, kohya's usual SDXL choice.
export const NETWORK_ALPHA_RATIO = 0.5;

export const BATCH_SIZE: Record<DeviceClass, number> = { "24gb": 1, "48gb": 2 };

export const TIER_NAMES = ["fast", "balanced", "quality"] as const;
export type TierName = (typeof TIER_NAMES)[number];

export interface Tier {
  maxTrainSteps: number;
  networkDim: number;
  resolution: number;
  deviceClasses: readonly DeviceClass[];
}

export const TIERS: Record<TierName, Tier> = {
  fast: { maxTrainSteps: 400, networkDim: 16, resolution: 768, deviceClasses: ["24gb", "48gb"] },
  balanced: { maxTrainSteps: 1500, networkDim: 32, resolution: 768, deviceClasses: ["24gb", "48gb"] },
  quality: { maxTrainSteps: 3000, networkDim: 32, resolution: 1024, deviceClasses: ["48gb"] },
};
