"""Where the command line prints: one console for results, one for messages on stderr.

Every command module prints through these objects (``output.console``), so a
test can point them at a narrow buffer in one place.
"""

from __future__ import annotations

from rich.console import Console

from kernelopt.cli.interrupts import StartupTrace

console = Console()
err_console = Console(stderr=True)
# what the running command has started or submitted, for the Ctrl-C message
TRACE = StartupTrace()
