"""Standalone per-kernel harness: run any one Triton kernel alone on its captured arguments.

The baseline wrapper is instrumented (each ``K.run(...)`` becomes
``_ko_probe('K', K)(...)``) and run once on the captured flat arguments; the
probe copies every kernel's arguments *before* its first launch -- the whole
underlying storage, so offsets, strides and neighbouring bytes are exact --
and then launches it as usual.  Afterwards any kernel can be launched, timed
or compared in isolation on exactly the inputs it saw inside the model.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kernelopt.compile.wrapper_parse import parse_wrapper
from kernelopt.contracts.base import ArtifactRef
from kernelopt.contracts.compiled import CompileResult
from kernelopt.errors import DeterministicError
from kernelopt.store import ArtifactStore

PROBE_LINE = (
    "_ko_probe = __import__('kernelopt.compile.standalone_kernels', fromlist=['Probe']).Probe()\n"
)


def instrument_source(source: str) -> str:
    """The wrapper with every Triton launch routed through the module's ``_ko_probe``."""
    parsed = parse_wrapper(source)
    data = source.encode("utf-8")
    edits: list[tuple[int, int, str]] = []
    for event in parsed.launches:
        prefix = f"{event.name}.run("
        if not event.text.startswith(prefix):
            raise DeterministicError(f"unexpected launch statement: {event.text[:80]}")
        new = f"_ko_probe({event.name!r}, {event.name})(" + event.text[len(prefix) :]
        edits.append((event.span.start, event.span.end, new))
    anchor = parsed.wait_span.start if parsed.wait_span else 0
    edits.append((anchor, anchor, PROBE_LINE))
    for start, end, text in sorted(edits, key=lambda e: e[0], reverse=True):
        data = data[:start] + text.encode("utf-8") + data[end:]
    return data.decode("utf-8")


def clone_storage(value: Any) -> Any:
    """A tensor over a copy of the same storage with the same offset/size/stride."""
    import torch

    if not isinstance(value, torch.Tensor):
        return value
    storage = value.untyped_storage()
    copy = torch.empty(0, dtype=value.dtype, device=value.device)
    copy.set_(storage.clone(), value.storage_offset(), value.size(), value.stride())
    return copy


@dataclass
class CapturedLaunch:
    name: str
    kernel: Any  # Inductor's CachingAutotuner
    args: list[Any]
    kwargs: dict[str, Any] = field(default_factory=dict)

    def fresh_args(self) -> list[Any]:
        return [clone_storage(a) for a in self.args]

    def launch(self, args: list[Any] | None = None) -> list[Any]:
        """Launch the original kernel on (a fresh copy of) its captured args; returns the args."""
        use = self.fresh_args() if args is None else args
        self.kernel.run(*use, **self.kwargs)
        return use


class Probe:
    """Records each kernel's arguments at its first launch, then launches it."""

    def __init__(self) -> None:
        self.captured: dict[str, CapturedLaunch] = {}
        self.recording = True

    def __call__(self, name: str, kernel: Any) -> Any:
        def launch(*args: Any, **kwargs: Any) -> Any:
            if self.recording and name not in self.captured:
                self.captured[name] = CapturedLaunch(
                    name, kernel, [clone_storage(a) for a in args], dict(kwargs)
                )
            return kernel.run(*args, **kwargs)

        return launch


class KernelHarness:
    """Every Triton kernel of a wrapper, runnable alone with its captured arguments."""

    def __init__(
        self,
        compiled: CompileResult,
        store: ArtifactStore,
        wrapper: ArtifactRef | None = None,
        args: list[Any] | None = None,
    ) -> None:
        from kernelopt.compile.capture import clone_exact
        from kernelopt.compile.runtime import (
            load_tensors,
            load_wrapper_module,
            pin_configs,
            run_call,
        )

        ref = wrapper or compiled.wrapper
        text = instrument_source(store.get_text(ref))
        self.module = load_wrapper_module(text, f"{compiled.problem.name}_probe")
        pin_configs(self.module, dict(compiled.kernel_configs))
        probe: Probe = self.module._ko_probe
        probe.captured.clear()
        probe.recording = True
        flat = args if args is not None else load_tensors(store, compiled.args, "cuda")
        run_call(self.module, [clone_exact(a) for a in flat])
        probe.recording = False
        self.launches = dict(probe.captured)

    def kernel(self, name: str) -> CapturedLaunch:
        if name not in self.launches:
            raise DeterministicError(f"kernel {name} was not launched by this wrapper")
        return self.launches[name]

    def time_ms(self, name: str) -> float:
        from kernelopt.compile.timing import bench_ms

        launch = self.kernel(name)
        args = launch.fresh_args()
        return bench_ms(lambda: launch.kernel.run(*args, **launch.kwargs))
