import { z } from "zod";
import { TIER_NAMES } from "../tiers.ts";
import { requestPath } from "./request-path.ts";

export const TrainRequest = z.strictObject({
  dataset_dir: requestPath,
  base_model_path: requestPath,
  output_dir: requestPath,
  output_name: z
    .string()
    .regex(/^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/, "must match ^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
    .refine((s) => !s.includes(".."), 'must not contain ".."'),
  trigger: z.string().regex(/^[A-Za-z0-9][A-Za-z0-9_-]{0,31}$/, "must match ^[A-Za-z0-9][A-Za-z0-9_-]{0,31}$"),
  subject_class: z
    .string()
    .regex(/^[a-z]+( [a-z]+)*$/, "must be lowercase words separated by single spaces, e.g. \"young woman\"")
    .max(32, "must be at most 32 characters"),
  repeats: z.int("must be an integer").min(1).max(100),
  tier: z.enum(TIER_NAMES),
  device_index: z.int("must be an integer").min(0).max(63),
  seed: z.int("must be an integer").min(0).max(2 ** 32 - 1),
});

export type TrainRequest = z.infer<typeof TrainRequest>;
export type TrainField = keyof TrainRequest;
