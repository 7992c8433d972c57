"""Count the Triton kernel launches Inductor generates for a problem, on a machine without a GPU.

A proxy for the GPU count, to compare two versions of a model before a GPU is at hand:
Inductor's CPU backend is switched to Triton, the forward is compiled, and the wrapper is
read by the segmentation's parser as soon as it is generated (its kernels then fail to
build, as no Triton backend serves the CPU; that error is expected).  The scheduler is
the GPU's, but device heuristics differ (problems/large/README.md compares the two
counts), so only differences between versions mean anything::

    python3 -m scripts.cpu_kernel_count problems/large/002_vit_b16.py
    # -> launches 90, distinct kernels 19
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import os
from pathlib import Path
from unittest import mock

from kernelopt.compile.wrapper_parse import parse_wrapper


def count(path: Path, small: bool) -> tuple[int, int]:
    """(launches, distinct kernels) in the generated wrapper of ``path``'s forward.

    Inductor's settings and the two functions patched here are restored on return, so
    the process compiles as before afterwards.
    """
    if small:
        os.environ["KERNELOPT_SMALL"] = "1"  # read by problems/large when imported
    import torch
    import torch._functorch.config as functorch_config
    import torch._inductor.config as inductor_config
    import torch.utils._triton as triton_utils
    from torch._inductor.graph import GraphLowering

    sources: list[str] = []
    codegen = GraphLowering.codegen

    def keep(self: GraphLowering, *args: object, **kwargs: object) -> object:
        out = codegen(self, *args, **kwargs)
        code = out[0] if isinstance(out, tuple) else out
        sources.append(str(getattr(code, "value", code)))
        return out

    spec = importlib.util.spec_from_file_location("counted_problem", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    model = module.Model(*module.get_init_inputs())
    with contextlib.ExitStack() as undo:
        # no cache may answer for the compile (a hit skips the code generation read here)
        undo.enter_context(
            inductor_config.patch(
                cpu_backend="triton",
                compile_threads=1,
                cpp_wrapper=False,
                force_disable_caches=True,
                fx_graph_cache=False,
            )
        )
        undo.enter_context(functorch_config.patch(enable_autograd_cache=False))
        torch._dynamo.reset()
        undo.enter_context(mock.patch.object(GraphLowering, "codegen", keep))
        # the generated code's cache key asks Triton for its backend, which a CPU lacks
        undo.enter_context(
            mock.patch.object(triton_utils, "triton_hash_with_backend", lambda: "cpu-proxy")
        )
        undo.callback(torch._dynamo.reset)
        try:
            with torch.no_grad():
                torch.compile(model)(*module.get_inputs())
        except Exception:  # the kernels cannot be built here; the code was read before that
            pass
    if not sources:
        raise RuntimeError(f"Inductor generated no wrapper code for {path}")
    # the segmentation's own parser: every launcher function (graph partitions included)
    launches = [event.name for src in sources for event in parse_wrapper(src).launches]
    return len(launches), len(set(launches))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("problem", type=Path)
    parser.add_argument("--full", action="store_true", help="full size (default: KERNELOPT_SMALL)")
    args = parser.parse_args()
    launches, distinct = count(args.problem, small=not args.full)
    print(f"launches {launches}, distinct kernels {distinct}")
    return 0 if launches else 1


if __name__ == "__main__":
    raise SystemExit(main())
