"""Per-pixel class probabilities: softmax over the class axis of (16, 150, 128, 128) logits.

Shapes: 16 images, 150 classes (an ADE20K-sized label set), 128x128 logit maps.
Category: reduction over a strided (non-innermost) axis, normalised (softmax).
Why it is interesting: a segmentation head's softmax runs over dim 1 of an NCHW
map, so each pixel normalises 150 values that lie 64 KiB apart in memory: the
reduced axis is strided and the contiguous axis (pixels) is the one kept, the
opposite of a row softmax. A kernel has to put pixels across lanes and walk the
classes, holding them or reading them twice.
"""

import torch
import torch.nn as nn

BATCH, CLASSES, HEIGHT, WIDTH = 16, 150, 128, 128


class Model(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, logits):
        return torch.softmax(logits, dim=self.dim)


def get_inputs():
    return [torch.randn(BATCH, CLASSES, HEIGHT, WIDTH) * 2.0]


def get_holdout_inputs():
    # other label sets (21 and 19 classes) and odd spatial sizes
    return [[torch.randn(2, 21, 65, 97) * 2.0], [torch.randn(1, 19, 128, 256) * 2.0]]


def get_init_inputs():
    return [1]
