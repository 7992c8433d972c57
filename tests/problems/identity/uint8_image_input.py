"""A uint8 image in NHWC, normalised and permuted to a non-contiguous float NCHW output."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, img):
        return (img.float() / 255.0 - 0.5).permute(0, 3, 1, 2)


def get_inputs():
    return [torch.randint(0, 256, (2, 16, 16, 3), dtype=torch.uint8)]


def get_init_inputs():
    return []
