"""Summed-area table (integral image) of a (8, 64, 192, 320) map: cumsum down H, then along W.

Shapes: 8 images, 64 channels, 192x320 (a 16:10 frame at 1/4 of 768x1280).
Category: scan (two inclusive prefix sums over different axes).
Why it is interesting: box filters, guided filters and region pooling read any
rectangle's sum from four entries of the integral image. The first scan runs
down the columns (strided by the 320-wide rows), the second along the rows; the
two axes cannot share one 1-D scan, and the sums grow with the image, so the
accumulation order shows in the rounding.
"""

import torch
import torch.nn as nn

BATCH, CHANNELS, HEIGHT, WIDTH = 8, 64, 192, 320


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x.cumsum(dim=-2).cumsum(dim=-1)


def get_inputs():
    return [torch.randn(BATCH, CHANNELS, HEIGHT, WIDTH)]


def get_holdout_inputs():
    return [[torch.randn(1, 3, 480, 640)], [torch.randn(2, 16, 97, 131)]]


def get_init_inputs():
    return []
