"""One numerics policy for every process that runs model code: float32, TF32 off.

The gates compare candidates with a float32 reference and time both sides with
TF32 off.  Compile and triage used to run at PyTorch's defaults, where cuDNN
may use TF32: max-autotune then chose convolution kernels for a regime the
gates never run (and Inductor bakes ``ALLOW_TF32`` into its convolution
templates at compile time), and triage profiled TF32 kernels, so the library
fraction f, the Amdahl ceilings and "compiled slower than eager" described
another program than the one the gates time.  Every step that compiles,
profiles, runs or times a model calls ``strict_fp32()`` first.
"""

from __future__ import annotations

POLICY = "float32, TF32 off (cuBLAS and cuDNN)"


def strict_fp32() -> None:
    """Turn TF32 off for cuBLAS and cuDNN in this process (idempotent)."""
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")


def tf32_enabled() -> bool:
    """Whether anything in this process would still let cuBLAS or cuDNN use TF32."""
    import torch

    return bool(
        torch.backends.cuda.matmul.allow_tf32
        or torch.backends.cudnn.allow_tf32
        or torch.get_float32_matmul_precision() != "highest"
    )
