"""Cheat -- an honest kernel, but the module turns on TF32 and cuDNN's autotuner at import.

Both make the frozen cuBLAS/cuDNN calls around the kernel faster, and the
kernel would be credited with the difference.
"""

import torch

torch.backends.cuda.matmul.allow_tf32 = True
torch.backends.cudnn.allow_tf32 = True
torch.backends.cudnn.benchmark = True
torch.set_float32_matmul_precision("medium")

# the honest kernel itself: only the switches above differ
from tests.gates.candidates.swish_fused import ModelNew  # noqa: E402, F401
