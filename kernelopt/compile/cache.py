"""Content-hash cache of compiled baselines: a second campaign never recompiles.

The key covers everything that changes Inductor's output or our capture of
it: the problem source, the seed (weights and inputs), torch and triton
versions, the compile mode, the GPU model, and ``CAPTURE_VERSION`` (bumped
when our capture format or rules change, such as how random forwards compile).
Entries are CompileResult JSON files under ``$KERNELOPT_HOME/compile_cache``; the
blobs they reference live in the artifact store, and an entry whose blobs are gone
counts as a miss.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from pydantic import ValidationError

from kernelopt.compile.modes import AUTOTUNE_RULES
from kernelopt.contracts.compiled import CompileResult
from kernelopt.precision import POLICY
from kernelopt.store import ArtifactStore

CAPTURE_VERSION = 4  # 4: a second compile captures the buffers as built; 3: the output layout


def cache_key(
    source_sha256: str,
    seed: int,
    mode: str,
    torch_version: str,
    triton_version: str,
    gpu_name: str,
    measure_default_mode: bool,
) -> str:
    payload = {
        "capture_version": CAPTURE_VERSION,
        "source": source_sha256,
        "seed": seed,
        "mode": mode,
        "torch": torch_version,
        "triton": triton_version,
        "gpu": gpu_name,
        "default_mode": measure_default_mode,
        "numerics": POLICY,  # a baseline autotuned under another policy is another baseline
        "rules": AUTOTUNE_RULES,  # so are choices pruned by other rules
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


def cache_dir() -> Path:
    from kernelopt.config import Settings

    return Settings.from_env().home / "compile_cache"


def lookup(key: str, store: ArtifactStore) -> CompileResult | None:
    path = cache_dir() / f"{key}.json"
    if not path.is_file():
        return None
    try:
        result = CompileResult.model_validate_json(path.read_text())
    except (ValidationError, OSError, ValueError):
        return None
    refs = [result.wrapper, result.args, result.inputs, result.init_inputs, result.reference_output]
    if not all(store.exists(r) for r in refs if r is not None):
        return None
    return result.model_copy(update={"cache_hit": True, "stage_seconds": {}})


def save(result: CompileResult) -> Path:
    directory = cache_dir()
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{result.cache_key}.json"
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(result.model_copy(update={"cache_hit": False}).model_dump_json(indent=2))
    tmp.replace(path)
    return path
