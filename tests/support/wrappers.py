"""Shared helpers for the compile tests: committed wrapper fixtures and tiny problems."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.paths import ROOT

FIXTURES = ROOT / "tests" / "fixtures" / "wrappers"
DATA = ROOT / "tests" / "fixtures" / "compile"
CORE_LIST = ROOT / "problems" / "core.txt"


def problem_name(rel_path: str) -> str:
    """``level1/001_relu_chain.py`` -> ``level1_001_relu_chain`` (fixture and spec name)."""
    p = Path(rel_path)
    return f"{p.parent.name}_{p.stem}"


def core_problems() -> list[str]:
    """Relative paths (under problems/) of the core set."""
    if not CORE_LIST.is_file():
        return []
    return [
        line.strip()
        for line in CORE_LIST.read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]


def fixture_names() -> list[str]:
    """Problems with a committed wrapper fixture (captured on the GPU host)."""
    return sorted(
        p.name.removesuffix(".py.txt")
        for p in FIXTURES.glob("*.py.txt")
        if ".default." not in p.name
    )


def wrapper_text(name: str) -> str:
    return (FIXTURES / f"{name}.py.txt").read_text()


def fixture_json(name: str, kind: str) -> dict:
    return json.loads((FIXTURES / f"{name}.{kind}.json").read_text())
