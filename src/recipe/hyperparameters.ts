
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
export const DATA_LOADER_WORKERS = 1;

// Alpha at half the rank keeps the LoRA's effective scale at 0.5, kohya's usual SDXL choice.
export const NETWORK_ALPHA_RATIO = 0.5;
