#!/usr/bin/env python3
"""Write a full-size SDXL base checkpoint with random weights, in the original single-file format, and check it loads.

    PYTHONPATH=<sd-scripts> <venv>/bin/python make-checkpoint.py OUT.safetensors [--seed N]

The models are sd-scripts' own (library/sdxl_original_unet.py's U-Net; the CLIP text encoders and the diffusers VAE
built from the very configs library/sdxl_model_util.load_models_from_sdxl_checkpoint uses) and the file is written by
its own sdxl_model_util.save_stable_diffusion_checkpoint, fp16, so the keys are the original ones:
model.diffusion_model.*, conditioner.embedders.0.transformer.*, conditioner.embedders.1.model.*, first_stage_model.*.
The file is then loaded back with sdxl_model_util.load_models_from_sdxl_checkpoint, as training does.
Each model is built in fp32 (PyTorch's and transformers' default initialisation) and halved before the next is
built, so the peak is the fp32 U-Net (~10.3 GB) or the fp16 models plus safetensors' serialised copy (~14 GB).
About 6.9 GB on disk.
"""
import argparse
import math
import resource
import time

import torch
from accelerate import init_empty_weights  # noqa: F401  (sd-scripts' import order: accelerate before transformers)
from diffusers import AutoencoderKL
from transformers import CLIPTextConfig, CLIPTextModel, CLIPTextModelWithProjection

from library import model_util, sdxl_model_util, sdxl_original_unet

# The text encoder configs of load_models_from_sdxl_checkpoint (sdxl_model_util.py), which it builds inline.
COMMON = dict(
    vocab_size=49408, max_position_embeddings=77, layer_norm_eps=1e-05, dropout=0.0, attention_dropout=0.0,
    initializer_range=0.02, initializer_factor=1.0, pad_token_id=1, bos_token_id=0, eos_token_id=2,
    model_type="clip_text_model",
)
TE1 = dict(hidden_size=768, intermediate_size=3072, num_hidden_layers=12, num_attention_heads=12,
           hidden_act="quick_gelu", projection_dim=768, **COMMON)
TE2 = dict(hidden_size=1280, intermediate_size=5120, num_hidden_layers=32, num_attention_heads=20,
           hidden_act="gelu", projection_dim=1280, **COMMON)


def peak_gib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024**2


def built(name: str, make):
    t = time.time()
    model = make().to(torch.float16).eval().requires_grad_(False)
    params = sum(p.numel() for p in model.parameters())
    print(f"{name}: {params / 1e6:.1f} M parameters, built in {time.time() - t:.0f} s, peak RSS {peak_gib():.1f} GiB")
    return model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", help="the .safetensors file to write")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    torch.manual_seed(args.seed)
    start = time.time()

    unet = built("U-Net", sdxl_original_unet.SdxlUNet2DConditionModel)
    te1 = built("text encoder 1", lambda: CLIPTextModel(CLIPTextConfig(**TE1)))
    te2 = built("text encoder 2", lambda: CLIPTextModelWithProjection(CLIPTextConfig(**TE2)))
    vae = built("VAE", lambda: AutoencoderKL(**model_util.create_vae_diffusers_config()))
    logit_scale = torch.tensor(math.log(100.0), dtype=torch.float16)  # open_clip's trained value, ln(100)

    t = time.time()
    metadata = {"modelspec.title": "random SDXL (make-checkpoint.py)", "seed": str(args.seed)}
    # save_dtype=None: the models are fp16 already, and a save_dtype would clone every tensor (+6.9 GB).
    keys = sdxl_model_util.save_stable_diffusion_checkpoint(
        args.out, te1, te2, unet, 0, 0, None, vae, logit_scale, metadata, save_dtype=None
    )
    print(f"saved {keys} tensors to {args.out} in {time.time() - t:.0f} s, peak RSS {peak_gib():.1f} GiB")
    del unet, te1, te2, vae

    t = time.time()
    te1, te2, vae, unet, logit_scale, ckpt_info = sdxl_model_util.load_models_from_sdxl_checkpoint(
        sdxl_model_util.MODEL_VERSION_SDXL_BASE_V1_0, args.out, "cpu", dtype=torch.float16
    )
    for name, model in (("U-Net", unet), ("text encoder 1", te1), ("text encoder 2", te2), ("VAE", vae)):
        bad = [n for n, p in model.named_parameters() if p.is_meta or not torch.isfinite(p).all()]
        assert not bad, f"{name}: {bad[:3]} not loaded or not finite"
    print(f"loaded back in {time.time() - t:.0f} s (logit_scale {float(logit_scale):.4f}), peak RSS {peak_gib():.1f} GiB")
    print(f"total {time.time() - start:.0f} s")


if __name__ == "__main__":
    main()
