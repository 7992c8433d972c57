"""Single-kernel vs multi-kernel mode (docs/method.md#dispatch-aware-search), with the reason recorded.

Single-kernel mode makes the whole forward the one search target (the agent
writes a complete implementation, library call included); multi-kernel mode
freezes library calls and searches only Triton kernels and fusable groups.

The rule reads the compiled graph, not the problem's label:

* no operator at all, or exactly one (one library call, or one Triton kernel)
  -> single;
* exactly one library call that is the graph's *last* operator, preceded only
  by Triton kernels that prepare its operands (Inductor materialising
  ``diag(a)`` or ``tril(A)`` before a generic GEMM) -> single: the operator is
  the forward, and structure that the generic GEMM ignores is exactly where
  the large algebraic wins are (docs/method.md#algebraic-wins);
* anything else -> multi.

The user can force either mode; the reason then says so and keeps the
automatic reading for the record.
"""

from __future__ import annotations

from kernelopt.compile.wrapper_parse import ParsedWrapper
from kernelopt.contracts.compiled import SearchMode


def _describe(parsed: ParsedWrapper) -> str:
    launches = parsed.launches
    kernels = {e.name for e in launches}
    libs = parsed.library_calls
    lib_names = sorted({e.name for e in libs})
    text = f"{len(launches)} Triton launch(es) of {len(kernels)} kernel(s), {len(libs)} library call(s)"
    if lib_names:
        text += f" ({', '.join(lib_names)})"
    return text


def auto_mode(parsed: ParsedWrapper) -> tuple[SearchMode, str]:
    """The automatic choice and why."""
    events = parsed.events
    libs = parsed.library_calls
    shape = _describe(parsed)
    if not events:
        return SearchMode.SINGLE, f"no kernel at all ({shape}): the forward is the only target"
    if len(events) == 1:
        what = "library call" if libs else "Triton kernel"
        return SearchMode.SINGLE, f"one operator, a single {what} ({shape})"
    if len(libs) == 1 and events[-1].kind == "library":
        return SearchMode.SINGLE, (
            f"one library call ({libs[0].name}) whose operands are prepared by "
            f"{len(events) - 1} Triton launch(es) ({shape}): the operator is the forward, "
            "so the whole forward is searched (structured operands can beat a generic GEMM)"
        )
    return SearchMode.MULTI, f"{shape}: library calls frozen, Triton kernels searched"


def select_mode(parsed: ParsedWrapper, requested: SearchMode) -> tuple[SearchMode, str, bool]:
    """(mode, reason, forced)."""
    auto, why = auto_mode(parsed)
    if requested == SearchMode.AUTO:
        return auto, f"auto: {why}", False
    return requested, f"forced by the user; automatic choice would be {auto.value} ({why})", True
