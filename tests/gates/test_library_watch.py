"""Kernels the candidate registers through ``torch.library`` for ops the harness runs."""

from __future__ import annotations

import torch

from gates.harness_watch import HarnessWatch, RecordGuard


def _alias(x: torch.Tensor) -> torch.Tensor:
    return torch.ops.aten.alias.default(x)


def test_a_kernel_registered_for_an_aten_op_after_arming_is_named_and_taken_back() -> None:
    watch = HarnessWatch()
    guard = RecordGuard(["gates.checked_calls"])
    lib = torch.library.Library("aten", "IMPL")
    try:
        lib.impl("detach", _alias, "CPU")
        label = "a kernel the candidate registered for aten::detach (CPU)"
        assert watch.tampered() == [label]
        assert guard.tampered() == [label]
        watch.restore()
        assert watch.tampered() == []
        assert torch.ones(2).detach().tolist() == [1.0, 1.0]
    finally:
        lib._destroy()


def test_meta_kernels_custom_namespaces_and_earlier_registrations_are_not_named() -> None:
    before = torch.library.Library("aten", "IMPL")  # made before the watch was armed
    try:
        before.impl("detach", _alias, "CPU")
        watch = HarnessWatch()
        assert watch.tampered() == []
        before._destroy()  # torch's detach again, for what follows
        meta = torch.library.Library("aten", "IMPL")
        mine = torch.library.Library("kernelopt_test_ns", "FRAGMENT")
        try:
            meta.impl("detach", _alias, "Meta")
            mine.define("foo(Tensor x) -> Tensor")
            mine.impl("foo", _alias, "CPU")
            mine.impl("foo", _alias, "CompositeExplicitAutograd")
            assert torch.ops.kernelopt_test_ns.foo(torch.ones(1)).tolist() == [1.0]
            assert watch.tampered() == []
        finally:
            meta._destroy()
            mine._destroy()
    finally:
        before._destroy()


def test_putting_torchs_library_constructor_back_is_tampering() -> None:
    watch = HarnessWatch()
    wrapper = torch._C._dispatch_library
    from gates import harness_watch

    try:
        torch._C._dispatch_library = harness_watch._make_library
        assert watch.tampered() == ["torch._C._dispatch_library"]
        watch.restore()
        assert torch._C._dispatch_library is wrapper
    finally:
        torch._C._dispatch_library = wrapper
