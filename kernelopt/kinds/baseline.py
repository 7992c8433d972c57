"""The baseline of a kernel problem, and every built-in variant of it, as a ``ModelNew`` module.

Single-kernel mode already knows how to check, re-stitch and time a module
that defines ``class ModelNew`` (``kernelopt.compile.runtime.ForwardRunner``,
the gates' candidate child).  So the file's own launcher becomes one, by
appending a short shim to the problem's source:

* Triton: ``ModelNew.forward(*inputs)`` calls ``launch(*inputs, **config)``,
  where ``config`` holds launch's keyword-only parameters (empty for the
  baseline: the file's defaults);
* Helion: each ``@helion.kernel`` is re-bound to a copy pinned to one config
  (the baseline's: Helion's own autotuning result, see ``helion_kernels``),
  then ``ModelNew.forward`` calls ``launch`` (or the one kernel).

The problem's text is kept verbatim above the shim, so the baseline runs the
very kernel the user wrote; a marker comment records the config, which is
how the built-in proposer reads a state back.
"""

from __future__ import annotations

import json
from typing import Any

from kernelopt.contracts.problem import ProblemKind
from kernelopt.loaded_problem import KernelProblem

MARKER = "# kernelopt:config "
SHIM_RULE = "# " + "-" * 72


def _config_json(config: dict[str, Any]) -> str:
    return json.dumps(config, sort_keys=True, separators=(", ", ": "))


def triton_shim(entry: str, config: dict[str, Any], note: str) -> str:
    return (
        f"\n\n{SHIM_RULE}\n"
        f"# kernelopt: {note}\n"
        f"{MARKER}{_config_json(config)}\n"
        "import torch as _ko_torch\n\n"
        f"_ko_entry = {entry}\n"
        f"_KO_LAUNCH_CONFIG = {config!r}\n\n\n"
        "class ModelNew(_ko_torch.nn.Module):\n"
        f'    """kernelopt: {entry}(*inputs) with this launch configuration."""\n\n'
        "    def forward(self, *inputs):\n"
        "        return _ko_entry(*inputs, **_KO_LAUNCH_CONFIG)\n"
    )


def helion_shim(entry: str, configs: dict[str, dict[str, Any]], note: str) -> str:
    return (
        f"\n\n{SHIM_RULE}\n"
        f"# kernelopt: {note}\n"
        f"{MARKER}{_config_json(configs)}\n"
        "import torch as _ko_torch\n"
        "from kernelopt.kinds.helion_kernels import pinned as _ko_pinned\n\n"
        f"_KO_HELION_CONFIGS = {configs!r}\n"
        "for _ko_name, _ko_config in _KO_HELION_CONFIGS.items():\n"
        "    globals()[_ko_name] = _ko_pinned(globals()[_ko_name], _ko_config)\n\n\n"
        "class ModelNew(_ko_torch.nn.Module):\n"
        f'    """kernelopt: {entry}(*inputs), every Helion kernel pinned to one config."""\n\n'
        "    def forward(self, *inputs):\n"
        f"        return {entry}(*inputs)\n"
    )


def forward_source(
    kind: ProblemKind, source: str, entry: str, config: dict[str, Any], note: str
) -> str:
    """A problem's ``source`` plus a ``ModelNew`` that runs ``entry`` with ``config``.

    ``config``: Triton -- launch's keyword-only values to pass (``{}`` = the
    file's defaults); Helion -- kernel name -> Helion config dict.
    """
    body = source.rstrip("\n") + "\n"
    if kind == ProblemKind.HELION:
        return body + helion_shim(entry, config, note)
    return body + triton_shim(entry, config, note)


def read_config(source: str) -> dict[str, Any] | None:
    """The config a ``forward_source`` text was made with; None for anything else."""
    for line in reversed(source.splitlines()):
        if line.startswith(MARKER):
            try:
                value = json.loads(line[len(MARKER) :])
            except json.JSONDecodeError:
                return None
            return value if isinstance(value, dict) else None
    return None


def baseline_config(problem: KernelProblem, device: str, seed: int = 0) -> tuple[dict, str]:
    """(config, how it was chosen) of the baseline on ``device``."""
    if problem.kind == ProblemKind.HELION:
        from kernelopt.kinds.helion_kernels import baseline_configs

        chosen = baseline_configs(problem, device, seed)
        return chosen.configs, chosen.describe()
    defaults = ", ".join(f"{k}={v}" for k, v in problem.tunables.items()) or "none"
    return {}, f"the file's own launch() with its defaults (launch configuration: {defaults})"


def baseline_source(problem: KernelProblem, device: str, seed: int = 0) -> tuple[str, str]:
    """(source of the baseline ``ModelNew`` module, how its config was chosen)."""
    config, how = baseline_config(problem, device, seed)
    text = forward_source(problem.kind, problem.source, problem.entry, config, f"baseline: {how}")
    return text, how


def baseline_model(problem: KernelProblem, device: str, seed: int = 0) -> Any:
    """The baseline as a module on ``device`` (what ``kernelopt verify`` times as gate 4's side B)."""
    from kernelopt.kinds.modules import import_source

    source, _ = baseline_source(problem, device, seed)
    module = import_source(source, f"baseline_{problem.name}", problem.path)
    return module.ModelNew().to(device)
