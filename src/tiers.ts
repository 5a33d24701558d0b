import { z } from "zod";

// The tiers a request names and the device classes they may run on: read by the config, the request checks,
// admission and the recipe alike, so it sits below all of them.
export const DeviceClass = z.enum(["24gb", "48gb"]);
export type DeviceClass = z.infer<typeof DeviceClass>;

// The tiers a request may name.
export const TIER_NAMES = ["fast", "balanced", "quality"] as const;
type TierName = (typeof TIER_NAMES)[number];
// What a job may run: a request's tier, or `smoke`, the worker's own short run (`lora-worker smoke`) that no
// request can name.
export const RUN_TIERS = [...TIER_NAMES, "smoke"] as const;
export type RunTier = (typeof RUN_TIERS)[number];

export interface Tier {
  maxTrainSteps: number;
  networkDim: number;
  resolution: number;
  /** Images per step: the tier's, not the card's, so a request trains the same on either. */
  batchSize: number;
  deviceClasses: readonly DeviceClass[];
  /** A state and an intermediate LoRA are saved every this many steps: the most a failure or a pause loses. */
  checkpointEvery: number;
  /** The sampler steps of each preview image. */
  sampleSteps: number;
  /** The tier whose configured VRAM need and wall-clock bound the run is held to. */
  budget: TierName;
}

// checkpointEvery is the smaller of 10 % of the run and about 5 minutes of GPU time on the slowest card the
// tier runs on (SDXL at 768 px, batch 1 on the 24 GB card: ~1.5 s/step, 200 steps; at 1024 px, batch 2 on the
// 48 GB card: ~3 s/step, 100 steps).
const BOTH = DeviceClass.options;

const SAMPLE_STEPS = 28;
const FAST: Tier = {
  maxTrainSteps: 400, networkDim: 16, resolution: 768, batchSize: 1, deviceClasses: BOTH, checkpointEvery: 40,
  sampleSteps: SAMPLE_STEPS, budget: "fast",
};

export const TIERS: Record<RunTier, Tier> = {
  fast: FAST,
  balanced: { ...FAST, maxTrainSteps: 1500, networkDim: 32, checkpointEvery: 150, budget: "balanced" },
  quality: {
    ...FAST, maxTrainSteps: 3000, networkDim: 32, resolution: 1024, batchSize: 2, deviceClasses: ["48gb"],
    checkpointEvery: 100,
    budget: "quality",
  },
  // The fast tier's argv but for its length: a state every 2 steps, 6 steps in all, and a quick preview, so a
  // smoke run pauses at its first state, resumes from it and ends within minutes.
  smoke: { ...FAST, maxTrainSteps: 6, checkpointEvery: 2, sampleSteps: 4 },
};

// The LoRA's parameters per unit of rank: networks.lora on the U-Net only wraps every Linear of SDXL's
// Transformer2DModels (proj_in/out, attn1/attn2 q k v out, the GEGLU ff), r x (in + out) each:
// 5 transformers of 2 blocks at 640 channels and 6 of 10 blocks at 1280, cross-attention from 2048.
const LORA_PARAMS_PER_RANK = 2_659_840;
// The saved LoRA is fp16. A saved state holds the network in fp32 (model.safetensors) and AdamW8bit's two
// moments at one byte each (optimizer.bin); the scheduler and RNG files are a few kB.
const LORA_BYTES_PER_PARAM = 2;
const STATE_BYTES_PER_PARAM = 4 + 2;
const STATE_SMALL_FILES_BYTES = 1024 * 1024;

export function loraBytes(tier: Tier): number {
  return LORA_PARAMS_PER_RANK * tier.networkDim * LORA_BYTES_PER_PARAM;
}

function stateBytes(tier: Tier): number {
  return LORA_PARAMS_PER_RANK * tier.networkDim * STATE_BYTES_PER_PARAM + STATE_SMALL_FILES_BYTES;
}

// What a run writes to its run directory at its peak: while a checkpoint is saved, the previous state and
// intermediate LoRA are still there (sd-scripts removes them after), and at the end the last state, the newest
// intermediate and step state and the final LoRA are all present.
export function runPeakBytes(tier: Tier): number {
  return 2 * (stateBytes(tier) + loraBytes(tier));
}
