"""A set of library choices as a whole-forward candidate: the problem file plus ``ModelNew``.

The choices are written into the candidate's own code (constructor and
``forward``), so the wrapper the campaign hands back -- which embeds the
candidate -- reproduces them in a deployment without any process-wide setting.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from kernelopt.errors import DeterministicError
from kernelopt.proposer.header import header_json

HEADER = "# kernelopt library: "
CHANNELS_LAST, CUDNN_BENCHMARK, ADDMM_ACTIVATION = (
    "channels_last",
    "cudnn_benchmark",
    "addmm_activation",
)
KNOWN = (CHANNELS_LAST, CUDNN_BENCHMARK, ADDMM_ACTIVATION)
_BASE = "_KoLibraryForward"


class LibraryError(DeterministicError):
    """The choices cannot be written for this problem (e.g. no linear + ReLU to fuse)."""


def read_header(source: str) -> list[str] | None:
    """The choices a library candidate was made with (None: not one of ours)."""
    value = header_json(source, HEADER)
    return [str(v) for v in value] if isinstance(value, list) else None


_HELPERS = '''
import contextlib as _ko_contextlib  # noqa: E402

import torch  # noqa: E402


def _ko_to_channels_last(value):
    """A 4-D (5-D) floating tensor in channels_last (channels_last_3d), anything else as is."""
    if isinstance(value, torch.Tensor) and value.is_floating_point():
        if value.dim() == 4:
            return value.contiguous(memory_format=torch.channels_last)
        if value.dim() == 5:
            return value.contiguous(memory_format=torch.channels_last_3d)
    return value


def _ko_from_channels_last(value):
    """Outputs the channels_last choice left channels_last, back in the default layout."""
    if isinstance(value, (tuple, list)):
        return type(value)(_ko_from_channels_last(v) for v in value)
    if isinstance(value, torch.Tensor) and not value.is_contiguous():
        if value.dim() == 4 and value.is_contiguous(memory_format=torch.channels_last):
            return value.contiguous()
        if value.dim() == 5 and value.is_contiguous(memory_format=torch.channels_last_3d):
            return value.contiguous()
    return value


@_ko_contextlib.contextmanager
def _ko_cudnn_benchmark():
    """cuDNN's benchmark-mode algorithm selection for the calls inside, restored after."""
    before = torch.backends.cudnn.benchmark
    torch.backends.cudnn.benchmark = True
    try:
        yield
    finally:
        torch.backends.cudnn.benchmark = before
'''


def _epilogue_class(problem_source: str, seed: int) -> tuple[str, list[str]]:
    """``_KoLibraryForward(Model)`` with every linear + ReLU fused, and what changed."""
    from kernelopt.proposer.library.epilogue import addmm_relu
    from kernelopt.proposer.rewrites.graph import model_new_source, trace

    gm, _ = trace(problem_source, seed)
    done = addmm_relu(gm)
    if not done:
        raise LibraryError("no linear followed only by ReLU")
    text = model_new_source(problem_source, gm, done)
    # model_new_source writes header + problem + "class ModelNew(Model)"; keep the class
    tail = text.split(problem_source.rstrip(), 1)[1]
    tail = tail.replace("class ModelNew(Model):", f"class {_BASE}(Model):", 1)
    tail = tail.replace(
        "Model with an algebraically rewritten forward", "Model with cuBLASLt epilogues", 1
    )
    return tail, done


def candidate_source(problem_source: str, choices: Sequence[str], seed: int = 0) -> str:
    """The candidate for ``choices`` (a subset of ``KNOWN``) on the problem in ``problem_source``."""
    unknown = sorted(set(choices) - set(KNOWN))
    if unknown or not choices:
        raise LibraryError(f"unknown or no library choices: {unknown or list(choices)}")
    base, extra = "Model", ""
    if ADDMM_ACTIVATION in choices:
        extra, _ = _epilogue_class(problem_source, seed)
        base = _BASE
    scope = (
        "_ko_cudnn_benchmark()" if CUDNN_BENCHMARK in choices else "_ko_contextlib.nullcontext()"
    )
    init, convert = "", ""
    result = "super().forward(*args)"
    if CHANNELS_LAST in choices:
        init = (
            "    def __init__(self, *args, **kwargs):\n"
            "        super().__init__(*args, **kwargs)\n"
            "        # converted once; the captured weights are copied into them in place\n"
            "        for module in self.modules():\n"
            "            if isinstance(module, torch.nn.modules.conv._ConvNd):\n"
            "                module.weight.data = _ko_to_channels_last(module.weight.data)\n\n"
        )
        convert = "            args = tuple(_ko_to_channels_last(a) for a in args)\n"
        result = "_ko_from_channels_last(super().forward(*args))"
    ordered = [c for c in KNOWN if c in choices]
    return (
        f"{HEADER}{json.dumps(ordered)}\n{problem_source.rstrip()}\n\n{_HELPERS}{extra}\n\n"
        f"class ModelNew({base}):\n"
        f'    """Model with library choices {", ".join(ordered)} (same parameters)."""\n\n'
        f"{init}"
        "    def forward(self, *args):\n"
        f"        with {scope}:\n"
        f"{convert}"
        f"            return {result}\n"
    )
