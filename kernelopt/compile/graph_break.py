"""Dynamo's refusal to compile a forward as one graph, said in one line.

A campaign's outcome quotes only the first line of the compile step's error, and the
first line of a Dynamo error names the kind of break ("Failed to trace builtin
operator") but neither the operator nor where it is; both come lines later, in its
``Explanation:`` and its ``from user code:`` frames.  This puts them on the first line.
"""

from __future__ import annotations

import re

# the gate children and the store keep a problem under its content hash (kernelopt/store)
_STORED_PROBLEM = re.compile(r"^problem_[0-9a-f]{8,}\.py$")
_FRAME = re.compile(r'^\s*File "(?P<path>[^"]+)", line (?P<line>\d+), in (?P<fn>\S+)\s*$')


def one_line(text: str) -> str:
    """``text`` (a Dynamo error's message) as one line: its first line, its explanation and
    the innermost frame of the user's code with that line's source, where it has them."""
    lines = text.splitlines()
    if not lines:
        return ""
    parts = [lines[0].strip()]
    explanation = next(
        (ln.strip().removeprefix("Explanation:").strip() for ln in lines if _is_explanation(ln)),
        "",
    )
    if explanation and explanation not in parts[0]:
        parts.append(explanation)
    where = _innermost_user_frame(lines)
    if where:
        parts.append(where)
    return "; ".join(parts)


def _is_explanation(line: str) -> bool:
    return line.strip().startswith("Explanation:")


def _innermost_user_frame(lines: list[str]) -> str:
    """``at line N of FILE, in FN: SOURCE`` for the last frame under ``from user code:``."""
    try:
        start = next(i for i, ln in enumerate(lines) if ln.strip() == "from user code:")
    except StopIteration:
        return ""
    found = ""
    for i in range(start + 1, len(lines)):
        match = _FRAME.match(lines[i])
        if not match:
            continue
        name = match["path"].rsplit("/", 1)[-1]
        name = "the problem file" if _STORED_PROBLEM.match(name) else name
        source = lines[i + 1].strip() if i + 1 < len(lines) else ""
        found = f"at line {match['line']} of {name}, in {match['fn']}" + (
            f": {source}" if source and not _FRAME.match(lines[i + 1]) else ""
        )
    return found
