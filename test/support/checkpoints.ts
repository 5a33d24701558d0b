// Base-model files as small as they can be: real tensor names of each kind of checkpoint, a few per part,
// with tiny F16 shapes, so the header reads like the real thing while the file stays a few hundred bytes.
import { writeFileSync } from "node:fs";
import { safetensorsParts, type Tensor } from "../../src/safetensors/write.ts";

const UNET = ["model.diffusion_model.input_blocks.0.0.weight", "model.diffusion_model.middle_block.1.proj_in.weight", "model.diffusion_model.out.2.bias"];
const CLIP_L = ["conditioner.embedders.0.transformer.text_model.embeddings.token_embedding.weight", "conditioner.embedders.0.transformer.text_model.final_layer_norm.weight"];
const BIG_G = ["conditioner.embedders.1.model.transformer.resblocks.0.attn.in_proj_weight", "conditioner.embedders.1.model.text_projection", "conditioner.embedders.1.model.logit_scale"];
const VAE = ["first_stage_model.encoder.conv_in.weight", "first_stage_model.decoder.conv_out.weight", "first_stage_model.quant_conv.bias"];

export const CHECKPOINT_KEYS = {
  sdxl: [...UNET, ...CLIP_L, ...BIG_G, ...VAE],
  sdxlWithoutVae: [...UNET, ...CLIP_L, ...BIG_G],
  sdxlWithoutTextEncoders: [...UNET, ...VAE],
  sd15: [...UNET, "cond_stage_model.transformer.text_model.embeddings.token_embedding.weight", ...VAE],
  sd21: [...UNET, "cond_stage_model.model.transformer.resblocks.0.attn.in_proj_weight", "cond_stage_model.model.token_embedding.weight", ...VAE],
  sdxlRefiner: [...UNET, "conditioner.embedders.0.model.transformer.resblocks.0.attn.in_proj_weight", "conditioner.embedders.0.model.text_projection", ...VAE],
  lora: [
    "lora_unet_input_blocks_4_1_transformer_blocks_0_attn1_to_q.alpha",
    "lora_unet_input_blocks_4_1_transformer_blocks_0_attn1_to_q.lora_down.weight",
    "lora_te1_text_model_encoder_layers_0_self_attn_q_proj.lora_up.weight",
  ],
  flux: ["double_blocks.0.img_attn.qkv.weight", "single_blocks.0.linear1.weight", "final_layer.linear.weight"],
  diffusersUnet: ["conv_in.weight", "down_blocks.0.resnets.0.conv1.weight", "mid_block.attentions.0.proj_in.weight", "up_blocks.0.resnets.0.conv2.weight"],
  vae: ["encoder.conv_in.weight", "decoder.conv_out.weight", "quant_conv.weight", "post_quant_conv.weight"],
  unetOnly: UNET,
} satisfies Record<string, string[]>;

export function checkpointBytes(names: readonly string[]): Buffer {
  const tensors = names.map((name): Tensor => ({ name, dtype: "F16", shape: [2], data: new Uint8Array(4) }));
  return Buffer.concat(safetensorsParts(tensors, { "modelspec.architecture": "test fixture" }));
}

export function writeCheckpoint(path: string, names: readonly string[]): string {
  writeFileSync(path, checkpointBytes(names));
  return path;
}
