"""MLP-Mixer block: token-mixing MLP across patches (via transpose), then channel-mixing MLP.

Shapes: batch 32, 196 patches, 512 channels; token MLP 256 wide, channel MLP 2048 wide.
Category: small model (all-MLP vision block).
Why it is interesting: the token-mixing MLP runs on the transposed
activation, so Inductor must either copy the transpose or feed a strided
operand to the GEMM; LayerNorms and residuals sit between the GEMMs.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH, PATCHES, CHANNELS, TOKEN_HIDDEN, CHANNEL_HIDDEN = 32, 196, 512, 256, 2048


class Model(nn.Module):
    def __init__(self, patches: int, channels: int, token_hidden: int, channel_hidden: int):
        super().__init__()
        self.norm1 = nn.LayerNorm(channels)
        self.token_fc1 = nn.Linear(patches, token_hidden)
        self.token_fc2 = nn.Linear(token_hidden, patches)
        self.norm2 = nn.LayerNorm(channels)
        self.channel_fc1 = nn.Linear(channels, channel_hidden)
        self.channel_fc2 = nn.Linear(channel_hidden, channels)

    def forward(self, x):
        y = self.norm1(x).transpose(1, 2)
        y = self.token_fc2(F.gelu(self.token_fc1(y))).transpose(1, 2)
        x = x + y
        return x + self.channel_fc2(F.gelu(self.channel_fc1(self.norm2(x))))


def get_inputs():
    return [torch.randn(BATCH, PATCHES, CHANNELS)]


def get_holdout_inputs():
    # the patch count is baked into the token MLP, so only the batch varies
    return [[torch.randn(1, PATCHES, CHANNELS)], [torch.randn(5, PATCHES, CHANNELS)]]


def get_init_inputs():
    return [PATCHES, CHANNELS, TOKEN_HIDDEN, CHANNEL_HIDDEN]
