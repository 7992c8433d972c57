"""Row sums taken in an order that changes from call to call, as GPU atomics do.

The order is drawn from the operating system's entropy on every call, which no seed of the
gates reaches (a generator the model keeps is seeded with torch's): two calls with the same
seed differ in the last bits only.
"""

import os

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        order = torch.Generator().manual_seed(int.from_bytes(os.urandom(7), "little"))
        perm = torch.randperm(x.shape[1], generator=order).to(x.device)
        return x[:, perm].sum(dim=1)


def get_inputs():
    return [torch.randn(16, 4096)]


def get_init_inputs():
    return []
