"""Candidate source texts that several tests write out or send as a model's reply."""

from __future__ import annotations

# The honest swish-and-bias model (tests/fixtures/candidates/gates/swish_fused.py in plain
# torch): what a hostile candidate ends with, so that only its harm differs from an honest one.
SWISH_MODEL = """
class ModelNew(nn.Module):
    def __init__(self, d, scale):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(d))
        self.scale = scale

    def forward(self, x):
        return x * torch.sigmoid(x) * self.scale + self.bias
"""
