"""Input kinds beyond KernelBench modules: a standalone Triton kernel, a Helion kernel.

The method accepts three inputs (docs/method.md, "Inputs").  The first, a KernelBench module, is
what compile, segmentation, the search and the four gates were built for.
The other two are *adapted* to it rather than given machinery of their own:

    a kernel problem  ==  a KernelBench problem in single-kernel mode where
        Model      = reference(*inputs)       (the eager role: gates 2 and 3)
        baseline   = the file's own launcher  (what gates 3 and 4 compare with)
        candidates = ModelNew modules (or launch-only modules, given ModelNew)

Why an adapter and not a second pipeline: every guarantee of the checker
(isolated children, poisoned allocations, held-out seeds and shapes, the
float64 rule, fresh-process timing, the roofline) then holds for kernel
problems without a line of it being copied, and a fix to one holds for all.
Each kind is one class behind one base (``base.Kind``: text checks, load,
compile, runtime checks, baseline, built-in variants): ``module.ModuleKind``,
``kernel.TritonKind`` and ``kernel.HelionKind``.  ``registry`` picks the class
for a file (or a recorded ``ProblemKind``) and holds the entry points every
caller uses -- ``load_problem`` (the one loader, for the compile step and the
gate children alike), ``check_problem_file`` and ``compile_problem`` -- so no
module outside this package asks which kind a problem is.

Modules: ``base`` (the kind interface), ``module`` and ``kernel`` (the kinds),
``registry`` (dispatch and entry points), ``detect`` (kind and text-only
checks, no torch), ``problem`` (import of a kernel problem and its
KernelBench-shaped view), ``validate`` (memory, determinism, baseline
correctness), ``baseline`` (the ``ModelNew`` shim of the baseline and of
variants), ``helion_kernels`` (autotuned baseline, pinning), ``compile`` (the
kernel kinds' compile step), ``builtin`` (the built-in proposer's launch
space), ``candidates`` (launch-only candidates), ``modules`` (generated code
imported as modules).  The file formats are in the README ("Standalone
Triton and Helion kernels").

Importing this package imports no torch.
"""

from kernelopt.kinds.detect import check_kernel_source, detect_kind, helion_available

__all__ = ["check_kernel_source", "detect_kind", "helion_available"]
