import { z } from "zod";

// The tiers a request names and the device classes they may run on: read by the config, the request checks,
// admission and the recipe alike, so it sits below all of them.
export const DeviceClass = z.enum(["24gb", "48gb"]);
export type DeviceClass = z.infer<typeof DeviceClass>;

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
