"""Which of a candidate's Triton kernels Triton's interpreter ran: the CPU's gates check kernels
only where they run.

On the CPU the gate children run Triton kernels under ``TRITON_INTERPRET=1``.  A candidate
that branches on the device (``if not x.is_cuda: return F.gelu(x)``, a "CPU fallback")
passes them without running a kernel, and the verdict would say nothing of its GPU path.
Installed in the candidate child before the candidate is imported: it notes every kernel
made (``triton.jit`` under the interpreter) and every launch.
"""

from __future__ import annotations

import os
from typing import Any

_LIBRARIES = ("torch", "triton")  # their @triton.jit helpers are imported, not the candidate's


class InterpretedLaunches:
    """Kernels made and launched under Triton's interpreter since ``install`` (none elsewhere)."""

    def __init__(self) -> None:
        self.made: list[str] = []
        self.launches = 0

    def install(self) -> bool:
        """Count from now on; False (and nothing counted) when Triton is not interpreting."""
        if os.environ.get("TRITON_INTERPRET") != "1":
            return False
        from triton.runtime.interpreter import InterpretedFunction

        init, run, seen = InterpretedFunction.__init__, InterpretedFunction.run, self

        def counted_init(self: Any, fn: Any, *args: Any, **kwargs: Any) -> None:
            init(self, fn, *args, **kwargs)
            module = getattr(fn, "__module__", None) or ""
            if module.split(".")[0] not in _LIBRARIES:  # not Inductor's or Triton's helpers
                seen.made.append(getattr(fn, "__qualname__", repr(fn)))

        def counted_run(self: Any, *args: Any, **kwargs: Any) -> Any:
            if not kwargs.get("warmup"):
                seen.launches += 1
            return run(self, *args, **kwargs)

        InterpretedFunction.__init__ = counted_init  # type: ignore[method-assign]
        InterpretedFunction.run = counted_run  # type: ignore[method-assign]
        return True

    def unrun(self) -> list[str]:
        """The kernels made, when none of them was launched (else none: some may serve other
        shapes or dtypes)."""
        return [] if self.launches else sorted(set(self.made))
