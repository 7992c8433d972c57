"""Print the README's headline for a suite's results (issue 7's last step).

    python3 scripts/readme_headline.py docs/results/h200 [--partial]

Refuses while the suite is incomplete unless ``--partial``; paste the output
into the README's results section.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kernelopt.bench.headline import IncompleteSuite, headline_markdown  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", type=Path)
    parser.add_argument("--partial", action="store_true", help="allow an incomplete suite")
    args = parser.parse_args()
    try:
        sys.stdout.write(headline_markdown(args.results, partial=args.partial))
    except IncompleteSuite as exc:
        sys.stderr.write(f"readme_headline: {exc} (--partial to print it anyway)\n")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
