"""Autocast to bfloat16 inside forward, cast back to float32 for a softmax."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(32, 32)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with torch.autocast(device_type=x.device.type, dtype=torch.bfloat16):
            y = self.fc(x)
        return y.float().softmax(-1)


def get_inputs():
    return [torch.randn(8, 32)]


def get_init_inputs():
    return []
