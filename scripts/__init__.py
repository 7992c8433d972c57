"""Maintainer tools, each run from the repository root as ``python3 -m scripts.NAME``."""
