"""Input kinds beyond KernelBench modules: a standalone Triton kernel, a Helion kernel.

SPEC section 2 accepts three inputs.  The first, a KernelBench module, is
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
The price is a handful of hooks, each a few lines and each naming this
package: ``kernelopt.problem.load_problem`` / ``check_problem_file``
(dispatch on the kind), ``kernelopt.campaigns`` (cheap validation before a
campaign), ``kernelopt.compile.capture.compile_on`` (the compile step becomes
``kinds.compile``), ``gates.problem_io.ProblemFile`` and ``gates.jobs.build``
(the runtime checks, and the launcher instead of ``torch.compile`` as the
baseline), ``kernelopt.cli.verify`` (launch-only candidates).

Modules: ``detect`` (kind and text-only checks, no torch), ``problem``
(import and the KernelBench-shaped view), ``validate`` (memory, determinism,
baseline correctness), ``baseline`` (the ``ModelNew`` shim of the baseline
and of variants), ``helion_kernels`` (autotuned baseline, pinning),
``compile`` (the compile step), ``builtin`` (the built-in proposer's launch
space), ``candidates`` (launch-only candidates).  The file formats are in
the README ("Standalone Triton and Helion kernels").

Importing this package imports no torch.
"""

from kernelopt.kinds.detect import check_kernel_source, detect_kind, helion_available

__all__ = ["check_kernel_source", "detect_kind", "helion_available"]
