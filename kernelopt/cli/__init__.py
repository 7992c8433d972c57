"""The ``kernelopt`` command line: the only part of the package that imports
``workflows``, ``activities`` or ``worker`` (the import-linter contracts in
pyproject.toml hold everything else below them).
"""

from kernelopt.cli.app import main

__all__ = ["main"]
