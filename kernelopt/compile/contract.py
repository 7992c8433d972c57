"""The candidate contract: what a replacement kernel must look like to be re-stitched.

``CANDIDATE_CONTRACT`` is included verbatim in the LLM prompts, and
``restitch.detect_form`` enforces it, so the two cannot drift apart.

Three forms, chosen by what the candidate module defines:

(a) **Inductor form** (single kernel, same signature): the module defines
    ``def <kernel_name>(...)`` -- an Inductor-style Triton kernel with the
    original's runtime parameters in the same order (decorated like Inductor's,
    ``@triton_heuristics.<kind>(...)`` + ``@triton.jit``).  Its text replaces
    the original source inside ``async_compile.triton('<name>', '''...''')``;
    the launch line is unchanged.  Re-stitching the original kernel's own
    source reproduces the baseline output bit for bit.

(b) **Launch form** (any signature, and the only form for a fusion group): the
    module defines ``launch(*args)``.  For a single kernel it receives exactly
    the positional arguments of the original ``<name>.run(...)`` call, in
    order (tensors, then numels, then any grid values), without ``stream``.
    For a fusion group it receives the union of the members' tensor
    arguments in order of first appearance (see ``SearchTarget.signature``);
    it replaces all the group's launches and runs where the group's last
    launch ran.  It launches its own kernel(s) on the current CUDA stream
    (``torch.cuda.current_stream()``), writes results into the output tensors
    it was given (in place: it must not allocate and return new outputs), and
    returns nothing.

(c) **Forward form** (single-kernel mode, target kind ``forward``): a
    KernelBench-style module defining ``class ModelNew(nn.Module)`` with the
    same constructor arguments as ``Model`` and the same forward signature.
"""

from __future__ import annotations

CANDIDATE_CONTRACT = """\
How your code is put back into the compiled model (the candidate contract):

1. Replacing ONE Inductor Triton kernel with the SAME parameters: return a complete module
   that defines the kernel function under its original name, with the same runtime
   parameters in the same order (constexpr block sizes may change), Inductor style
   (`@triton_heuristics.<kind>(...)` then `@triton.jit`). It is compiled in place of the
   original source; the wrapper's launch line `name.run(...)` stays as it is.

2. Any other signature, or a FUSION GROUP of kernels: return a module that defines
       def launch(*args) -> None
   - single kernel: `args` are exactly the positional arguments of the original
     `name.run(...)` call, in order (tensors, then integer numels, then grid values if the
     original passed any); no `stream` argument.
   - fusion group: `args` are the tensors listed in the target's signature, in that order
     (the union of the group's tensor arguments, first appearance first); numels are not
     passed. Your launch replaces ALL launches of the group and runs where the last one ran.
   - Launch your own Triton kernel(s) on the current stream (torch.cuda.current_stream()).
   - Write results IN PLACE into the output tensors you are given (roles `out`/`inout`);
     do not allocate and return new outputs; return None. Respect the given strides.
   - Arguments may alias each other (Inductor reuses buffers): read before you overwrite.

3. Single-kernel mode (target kind `forward`): return a KernelBench-style module defining
   `class ModelNew(nn.Module)` with the same constructor arguments as `Model` and the same
   forward() signature. Keep parameter names and creation order identical to `Model` so the
   captured weights load into it.

Never: cache results across calls, use CUDA graphs, launch on a side stream, read or modify
inputs outside the given tensors, or special-case the input values you were shown.
"""
