"""``python -m scripts.llm_eval start | resume | report`` (see the package's docstring)."""

from scripts.llm_eval.commands import main

main()
