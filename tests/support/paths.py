"""The repository's root, for the tests and their support code wherever they sit."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
