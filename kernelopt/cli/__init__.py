"""The ``kernelopt`` command line: the only part of the package that imports
``workflows``, ``activities`` or ``worker`` (the layers in docs/ and pyproject's
import-linter contracts hold everything else below them).
"""

from kernelopt.cli.app import main

__all__ = ["main"]
