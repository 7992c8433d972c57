"""Template kernels run under the Triton interpreter on small CPU tensors."""

import os

os.environ.setdefault("TRITON_INTERPRET", "1")  # read when a @triton.jit function is defined
