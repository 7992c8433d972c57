"""The profiler and the strategy analyst (docs/method.md#agents).

harness_files   find or write a standalone harness (get_args() + call(args))
harness_runner  run it under ncu (one steady-state launch) or time it with CUDA events
ncu             the ncu command line, exports, and why it could not run
distill         report exports -> SOL %, duration, registers, spills, occupancy, top-3 rules
analyst         deterministic bottleneck class with its reasoning
profile         the activity body: profile_target(inp, store) -> ProfileResult
"""
