"""How every gate child calls the model: its mode, its RNG seed, its state (issue 30).

KernelBench-format models are evaluated as constructed (training mode unless
the constructor says otherwise), so dropout draws a new mask and batch norm
updates its running statistics on every call.  Candidates are compared with
one reference call per input set, so every child -- reference, candidate,
timing -- must start each call from the same place:

* **mode**: ``GateSettings.model_mode`` (``auto`` follows the file's
  ``KERNELOPT_MODE``, else the convention) is resolved once in the reference
  child and applied to every side;
* **randomness**: when the reference's forward draws random numbers, torch's
  (CPU and CUDA), Python's and NumPy's RNGs, and any ``torch.Generator`` the
  model keeps, are seeded before every call with the input set's call seed
  (the same in every process);
* **state**: buffers (and parameters) a call changes in place are restored
  before the next call, from what the model held when built.

The reference child writes the resolved ``EvaluationPolicy`` next to the
input files (``_policy.pt``, hashed with them), every other child reads it.
Seeding and restoring happen before a call, off the clock in timing.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from gates.protocol import EvaluationPolicy
from kernelopt.compile.output_layout import StateSnapshot, state_tensors
from kernelopt.kinds.validate import same_values
from kernelopt.loaded_problem import seed_python

POLICY_FILE = "_policy.pt"


def policy_path(inputs_dir: str | Path) -> Path:
    return Path(inputs_dir) / POLICY_FILE


def save_policy(inputs_dir: str | Path, policy: EvaluationPolicy) -> None:
    torch.save({"policy": policy.model_dump_json()}, policy_path(inputs_dir))


def load_policy(inputs_dir: str | Path) -> EvaluationPolicy:
    """The reference's policy; the default (as constructed, nothing seeded) when absent."""
    path = policy_path(inputs_dir)
    if not path.is_file():
        return EvaluationPolicy()
    data = torch.load(path, weights_only=True)
    return EvaluationPolicy.model_validate_json(data["policy"])


def call_seed(set_name: str, seed: int) -> int:
    """The RNG seed of every call on one input set: the same in every process."""
    return zlib.crc32(f"{set_name}/{seed}".encode()) & 0x7FFFFFFF


def seed_everything(seed: int, generators: list[torch.Generator] | None = None) -> None:
    """Seed torch (CPU and every CUDA device), Python's ``random``, NumPy if imported, and
    the model's own ``generators`` (``own_generators``).

    Not ``torch.manual_seed``: it also queues seeds for backends never initialised here
    (XPU, MTIA), each with a stack walk, which made the seeding before every timed call
    of a random forward dwarf the forward itself. The generators a CPU or CUDA forward
    draws from are the same; MPS, XPU, MTIA and custom devices are not seeded (the gates
    run on CPU and CUDA alone).
    """
    torch.default_generator.manual_seed(seed)
    if torch.backends.cuda.is_built():  # asks no driver: a CPU job on a GPU host stays off it
        torch.cuda.manual_seed_all(seed)  # queued until CUDA initialises, then applied
    seed_python(seed)
    for generator in generators or []:
        generator.manual_seed(seed)


def own_generators(module: torch.nn.Module | None) -> list[torch.Generator]:
    """The ``torch.Generator`` objects a model keeps as attributes: random streams of its
    own, which advance on every call as torch's global one does, so they are seeded with it."""
    if module is None:
        return []
    found = [
        v for m in module.modules() for v in vars(m).values() if isinstance(v, torch.Generator)
    ]
    return list({id(g): g for g in found}.values())


def module_of(fn: Any) -> torch.nn.Module | None:
    """The ``nn.Module`` behind a callable (``torch.compile``'s wrapper unwrapped), if any."""
    inner = getattr(fn, "_orig_mod", fn)
    return inner if isinstance(inner, torch.nn.Module) else None


def entries_of(fn: Any) -> dict[str, torch.Tensor]:
    """``fn``'s parameters and buffers by name: its module's, or an Inductor wrapper's captured
    ones (``kernelopt.compile.runtime.wrapper_forward``'s ``state_entries``)."""
    module = module_of(fn)
    if module is not None:
        return state_tensors(module)
    return dict(getattr(fn, "state_entries", None) or {})


def state_left(fn: Any, names: list[str]) -> list[torch.Tensor | None]:
    """Entries ``names`` of ``fn`` as the last call left them (None where it has none): the
    state the reference's forward changes is compared after every checked call."""
    tensors = entries_of(fn)
    return [tensors.get(n) for n in names]


class CapturedStateKeeper:
    """A wrapper's captured entries put back to their values at build, before every call (the
    wrapper holds the same tensors for good: nothing to rebind)."""

    def __init__(self, entries: dict[str, torch.Tensor]) -> None:
        self.entries = entries
        self.saved = {n: t.detach().clone() for n, t in entries.items()}

    def restore(self) -> None:
        with torch.no_grad():
            for name, tensor in self.entries.items():
                tensor.copy_(self.saved[name])


class StateKeeper(StateSnapshot):
    """Puts chosen state entries back to their values at construction, before every call
    (``StateSnapshot``), and says which a call changed."""

    def changed(self) -> list[str]:
        """Kept entries whose object or values differ from the saved ones (bitwise, NaN-aware)."""
        current = state_tensors(self.module)
        return [
            n
            for n, original in self.originals.items()
            if current.get(n) is not original or not same_values(original, self.saved[n])
        ]


class VersionWatch:
    """Parameters a call changed in place (version counters and identities, no copies)."""

    def __init__(self, module: torch.nn.Module) -> None:
        self.module = module
        self.objects = dict(module.named_parameters(remove_duplicate=False))
        self.seen = {n: t._version for n, t in self.objects.items()}

    def changed(self) -> list[str]:
        now = dict(self.module.named_parameters(remove_duplicate=False))
        return sorted(
            n
            for n, version in self.seen.items()
            if now.get(n) is not self.objects[n] or self.objects[n]._version != version
        )


def keep_names(module: torch.nn.Module, policy: EvaluationPolicy) -> list[str]:
    """The entries a child restores: the reference's stateful ones, by name.

    A candidate that renamed them keeps all its buffers instead (restored only
    when a call changes them).
    """
    if not policy.stateful:
        return []
    names = state_tensors(module)
    mine = [n for n in policy.stateful if n in names]
    if mine:
        return mine
    return [n for n, _ in module.named_buffers(remove_duplicate=False)]


def apply_mode(fn: Any, policy: EvaluationPolicy) -> None:
    """``train()`` / ``eval()`` as the policy says; ``as_constructed`` leaves every side be."""
    module = module_of(fn)
    if module is None or policy.mode == "as_constructed":
        return
    module.train(policy.mode == "train")


class CallPreparer:
    """Before every call on an input set: state restored, RNGs seeded (when the forward is random).

    ``fn`` is whatever the child calls: a module, or an Inductor wrapper whose captured
    parameters and buffers are restored by name.
    """

    def __init__(self, policy: EvaluationPolicy, fn: Any) -> None:
        self.policy = policy
        module = module_of(fn)
        keep = keep_names(module, policy) if module is not None else []
        self.keeper: StateKeeper | CapturedStateKeeper | None = (
            StateKeeper(module, keep) if module is not None and keep else None
        )
        if module is None and policy.stateful:  # an Inductor wrapper: its captured entries
            entries = entries_of(fn)
            kept = {n: entries[n] for n in policy.stateful if n in entries}
            self.keeper = CapturedStateKeeper(kept) if kept else None
        self.generators = own_generators(module)

    @property
    def active(self) -> bool:
        """False when a call needs nothing prepared (deterministic and stateless)."""
        return self.keeper is not None or self.policy.seeded

    def __call__(self, set_name: str) -> None:
        if self.keeper is not None:
            self.keeper.restore()
        if self.policy.seeded:
            seed_everything(self.policy.call_seeds.get(set_name, 0), self.generators)


def by_index(prepare: CallPreparer, names: list[str]) -> Callable[[int], None]:
    """The preparer keyed by a rotation's set index (timing children)."""
    return lambda k: prepare(names[k])
