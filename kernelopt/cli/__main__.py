"""``python -m kernelopt.cli``: the same as the ``kernelopt`` console script."""

import sys

from kernelopt.cli.app import main

sys.exit(main())
