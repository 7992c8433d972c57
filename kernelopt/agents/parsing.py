"""Turning model replies into typed values: pure functions that reject junk explicitly.

Every rejection raises ``LLMReplyError`` with a message fit to show the model
on its next attempt ("no ```python block", "line 12: invalid syntax", ...):
a malformed reply is never silently coerced into something runnable.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Sequence
from typing import Any

from kernelopt.contracts.directions import is_banned, normalize_direction
from kernelopt.contracts.search import Experience, Plan
from kernelopt.errors import LLMReplyError

MAX_DIRECTION_CHARS = 80
MAX_DESCRIPTION_CHARS = 2000
MAX_ENTRY_FIELD_CHARS = 400

_FENCE = re.compile(
    r"^[ \t]*(?P<fence>`{3,}|~{3,})[ \t]*(?P<lang>[A-Za-z0-9_+.-]*)[^\n]*\n(?P<body>.*?)^[ \t]*(?P=fence)[ \t]*$",
    re.DOTALL | re.MULTILINE,
)
_OPEN_FENCE = re.compile(
    r"^[ \t]*(?:`{3,}|~{3,})[ \t]*(?P<lang>[A-Za-z0-9_+.-]*)[^\n]*\n(?P<body>.*)\Z",
    re.DOTALL | re.MULTILINE,
)
_THINK = re.compile(r"<(think|thinking|reasoning)>.*?(</\1>|\Z)", re.DOTALL | re.IGNORECASE)
_TRAILING_COMMA = re.compile(r",(\s*[}\]])")
PYTHON_TAGS = ("python", "py", "python3", "py3", "")
CLASS_ENTRY_POINTS = ("ModelNew",)  # entry points that must be classes (detect_form's rule)


def strip_thinking(text: str) -> str:
    """The reply without reasoning blocks (``<think>...</think>``; an unclosed one runs to the end)."""
    return _THINK.sub("", text)


def code_blocks(text: str) -> list[tuple[str, str]]:
    """Every fenced block (``` or ~~~) as (language tag, body), in order; thinking ignored."""
    text = strip_thinking(text)
    return [(m.group("lang").lower(), m.group("body")) for m in _FENCE.finditer(text)]


def _loads_tolerant(candidate: str) -> Any:
    """json.loads, then again without trailing commas, then as a Python literal."""
    try:
        return json.loads(candidate)
    except json.JSONDecodeError as first:
        relaxed = _TRAILING_COMMA.sub(r"\1", candidate)
        try:
            return json.loads(relaxed)
        except json.JSONDecodeError:
            pass
        try:
            value = ast.literal_eval(relaxed)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            raise first from None
        if isinstance(value, dict | list):
            return value
        raise first from None


def _bracket_spans(text: str) -> list[str]:
    """Every top-level balanced {...} / [...] span, in order."""
    spans: list[str] = []
    i = 0
    while i < len(text):
        if text[i] in "{[":
            span = _balanced(text, i)
            if span:
                spans.append(span)
                i += len(span)
                continue
        i += 1
    return spans


def extract_json(text: str) -> Any:
    """The JSON value of a reply: each ```json block, the whole reply, then each {...}/[...] span.

    Reasoning blocks are dropped first; trailing commas and Python-style
    literals (single quotes, True/None) are tolerated.  Objects come before
    bare lists, so a stray ``[1]`` in prose does not shadow the answer.
    """
    if not text or not text.strip():
        raise LLMReplyError("the reply is empty")
    text = strip_thinking(text)
    if not text.strip():
        raise LLMReplyError("the reply holds only a reasoning block")
    candidates = [body for lang, body in code_blocks(text) if lang in ("json", "json5", "")]
    candidates.append(text.strip())
    spans = _bracket_spans(text)
    candidates += [s for s in spans if s.startswith("{")] + [s for s in spans if s.startswith("[")]
    errors = []
    for candidate in candidates:
        if not candidate.strip():
            continue
        try:
            return _loads_tolerant(candidate)
        except json.JSONDecodeError as exc:
            errors.append(str(exc))
    raise LLMReplyError(
        "the reply holds no valid JSON value" + (f" (first error: {errors[0]})" if errors else "")
    )


def _balanced(text: str, start: int) -> str:
    """The bracketed span starting at ``start``, respecting strings; '' if it never closes."""
    opening = text[start]
    closing = "}" if opening == "{" else "]"
    depth = 0
    in_string = False
    escaped = False
    for i in range(start, len(text)):
        ch = text[i]
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
            continue
        if ch == '"':
            in_string = True
        elif ch == opening:
            depth += 1
        elif ch == closing:
            depth -= 1
            if depth == 0:
                return text[start : i + 1]
    return ""


def _items(value: Any, key: str) -> list[Any]:
    if isinstance(value, dict):
        if key not in value:
            raise LLMReplyError(f'the JSON object has no "{key}" list (keys: {sorted(value)})')
        value = value[key]
    if not isinstance(value, list):
        raise LLMReplyError(f'"{key}" must be a JSON list, got {type(value).__name__}')
    return value


def _text_field(item: dict[str, Any], name: str, index: int, limit: int) -> str:
    value = item.get(name)
    if not isinstance(value, str) or not value.strip():
        raise LLMReplyError(f'item {index}: "{name}" must be a non-empty string')
    value = " ".join(value.split())
    if len(value) > limit:
        raise LLMReplyError(f'item {index}: "{name}" is longer than {limit} characters')
    return value


MAX_DECLINE_CHARS = 400


def parse_decline(text: str) -> str:
    """The planner's reason when it proposes no plan on purpose: ``{"plans": [], "no_plan":
    "why"}``.  Empty for any other reply (which ``parse_plans`` then reads)."""
    try:
        value = extract_json(text)
    except LLMReplyError:
        return ""
    if not isinstance(value, dict) or value.get("plans") not in (None, []):
        return ""
    reason = value.get("no_plan")
    if not isinstance(reason, str) or not reason.strip():
        return ""
    reason = " ".join(reason.split())
    return reason if len(reason) <= MAX_DECLINE_CHARS else reason[: MAX_DECLINE_CHARS - 3] + "..."


def parse_plans(text: str, max_plans: int, banned: Sequence[str] = ()) -> list[Plan]:
    """Plans from a planner reply: at most ``max_plans``, banned directions dropped.

    Rejects: no JSON, no "plans" list, items without a direction/description,
    and a reply whose every plan is banned or duplicated.
    """
    items = _items(extract_json(text), "plans")
    if not items:
        raise LLMReplyError("the reply proposes no plans")
    plans: list[Plan] = []
    seen: set[str] = set()
    dropped: list[str] = []
    for index, item in enumerate(items):
        if not isinstance(item, dict):
            raise LLMReplyError(f"item {index}: a plan must be a JSON object")
        direction = _text_field(item, "direction", index, MAX_DIRECTION_CHARS)
        description = _text_field(item, "description", index, MAX_DESCRIPTION_CHARS)
        key = normalize_direction(direction)
        if not key:
            raise LLMReplyError(f"item {index}: the direction has no letters or digits")
        if is_banned(direction, list(banned)) or key in seen:
            dropped.append(direction)
            continue
        seen.add(key)
        plans.append(Plan(direction=direction, description=description))
        if len(plans) == max_plans:
            break
    if not plans:
        raise LLMReplyError(
            "every proposed plan was banned or repeated: " + ", ".join(sorted(set(dropped)))
        )
    return plans


def parse_kernel_reply(text: str, entry_points: Sequence[str]) -> str:
    """The module source of an executor reply.

    Tries every ```python block (``py``, ``python3``, ``~~~`` fences too),
    last first, reasoning blocks ignored, and takes the last one that defines
    a Triton kernel, parses, and defines one of ``entry_points`` (when given):
    ``ModelNew`` as a class, any other name as a function, as
    ``restitch.detect_form`` requires.  The error names the best block's flaw.
    """
    if not text or not text.strip():
        raise LLMReplyError("the reply is empty")
    blocks = [body for lang, body in code_blocks(text) if lang in PYTHON_TAGS]
    tail = _unclosed_tail(text)
    if tail is not None:
        blocks.append(tail)
    cut = " (it ends inside an unclosed block: was it cut short?)"
    if not blocks:
        raise LLMReplyError(
            "the reply has no ```python code block" + (cut if _unclosed(text) else "")
        )
    kernels = [b for b in blocks if "@triton.jit" in b or "triton.jit(" in b]
    if not kernels:
        raise LLMReplyError("no ```python block defines a @triton.jit kernel")
    first_error: LLMReplyError | None = None
    for block in reversed(kernels):
        try:
            return _checked_module(block.strip() + "\n", entry_points)
        except LLMReplyError as exc:
            if first_error is None and block is tail:
                exc = LLMReplyError(str(exc) + cut)
            first_error = first_error or exc
    raise first_error or LLMReplyError("no usable ```python block")


def _unclosed_tail(text: str) -> str | None:
    """The body of a final ```python block that never closes, or None.

    Models often end a reply with the module and no closing fence; such a body
    counts when it parses and defines the entry points (``_checked_module``), as
    a reply cut short mid-module does not.
    """
    rest = _FENCE.sub("", strip_thinking(text))
    match = _OPEN_FENCE.search(rest)
    if match is None or match.group("lang").lower() not in PYTHON_TAGS:
        return None
    return match.group("body")


def _unclosed(text: str) -> bool:
    text = strip_thinking(text)
    return text.count("```") % 2 == 1 or text.count("~~~") % 2 == 1


def _checked_module(source: str, entry_points: Sequence[str]) -> str:
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        raise LLMReplyError(
            f"the module does not parse: line {exc.lineno}: {exc.msg}"
            + (f"\n    {exc.text.rstrip()}" if exc.text else "")
        ) from None
    if entry_points:
        functions, classes = _top_level_defs(tree)
        found = [
            name
            for name in entry_points
            if name in (classes if name in CLASS_ENTRY_POINTS else functions)
        ]
        if not found:
            defined = sorted(functions | classes)
            raise LLMReplyError(
                "the module defines none of the required entry points "
                f"({', '.join(_describe_entry(n) for n in entry_points)}); it defines: "
                f"{', '.join(defined) or 'nothing'}"
            )
    return source


def _describe_entry(name: str) -> str:
    return f"class {name}" if name in CLASS_ENTRY_POINTS else f"def {name}(...)"


def _top_level_defs(tree: ast.Module) -> tuple[set[str], set[str]]:
    """(functions, classes) defined at module level."""
    functions: set[str] = set()
    classes: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            functions.add(node.name)
        elif isinstance(node, ast.ClassDef):
            classes.add(node.name)
    return functions, classes


def parse_experiences(text: str, max_entries: int = 4) -> list[Experience]:
    """Experience entries from a summarizer reply; an empty list is a valid answer."""
    items = _items(extract_json(text), "entries")
    entries: list[Experience] = []
    for index, item in enumerate(items[:max_entries]):
        if not isinstance(item, dict):
            raise LLMReplyError(f"item {index}: an entry must be a JSON object")
        situation = _text_field(item, "situation", index, MAX_ENTRY_FIELD_CHARS)
        action = _text_field(item, "action", index, MAX_ENTRY_FIELD_CHARS)
        effect = item.get("effect", "")
        if not isinstance(effect, str):
            raise LLMReplyError(f'item {index}: "effect" must be a string')
        tags = item.get("tags", [])
        if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
            raise LLMReplyError(f'item {index}: "tags" must be a list of strings')
        entries.append(
            Experience(
                situation=situation,
                action=action,
                effect=" ".join(effect.split())[:MAX_ENTRY_FIELD_CHARS],
                tags=[t.strip().lower() for t in tags if t.strip()][:8],
            )
        )
    return entries
