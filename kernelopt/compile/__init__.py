"""Dispatch-aware compilation: capture, segmentation, triage and re-stitching.

Data flows problem -> ``capture.compile_module`` (baseline wrapper + captured
arguments; ``kernelopt.kinds`` hands each kind to its own compile step) ->
``segment.segment`` (library calls frozen, Triton kernels exposed) -> ``triage.triage`` (library fraction f, Amdahl ceiling) -> search ->
``restitch.restitch`` (replacements put back into the wrapper).  Importing this
package imports neither torch nor triton; the GPU modules do so lazily.
"""
