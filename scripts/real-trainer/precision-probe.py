#!/usr/bin/env python3
"""How fast this CPU runs the U-Net's kind of work in bf16 and in fp32, for cpu-accelerate's choice.

    python precision-probe.py   ->  {"bf16_ms": 12.3, "fp32_ms": 20.1}

A block of a convolution and an attention-sized matmul at the harness's 256 px latent size (32x32), timed as
sd-scripts runs it under accelerate's bf16 autocast and without it; the median of several rounds after a warm-up.
"""
import json
import time

import torch

torch.manual_seed(0)
conv = torch.nn.Conv2d(640, 640, 3, padding=1)
linear = torch.nn.Linear(640, 640)
x = torch.randn(1, 640, 32, 32)


def block() -> None:
    with torch.no_grad():
        y = conv(x)
        tokens = y.flatten(2).transpose(1, 2)
        linear(tokens) @ tokens.transpose(1, 2)


def timed(bf16: bool) -> float:
    rounds = []
    for i in range(7):
        started = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            block()
        if i > 1:
            rounds.append((time.perf_counter() - started) * 1000)
    return round(sorted(rounds)[len(rounds) // 2], 1)


print(json.dumps({"bf16_ms": timed(True), "fp32_ms": timed(False)}))
