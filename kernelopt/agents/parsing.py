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

from kernelopt.contracts.search import Experience, Plan
from kernelopt.errors import LLMReplyError

MAX_DIRECTION_CHARS = 80
MAX_DESCRIPTION_CHARS = 2000
MAX_ENTRY_FIELD_CHARS = 400

_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[ \t]*\n(.*?)```", re.DOTALL)


def code_blocks(text: str) -> list[tuple[str, str]]:
    """Every fenced block as (language tag, body), in order."""
    return [(m.group(1).lower(), m.group(2)) for m in _FENCE.finditer(text)]


def extract_json(text: str) -> Any:
    """The JSON value of a reply: a ```json block, the whole reply, or its first {...}/[...]."""
    if not text or not text.strip():
        raise LLMReplyError("the reply is empty")
    candidates = [body for lang, body in code_blocks(text) if lang in ("json", "")]
    candidates.append(text.strip())
    start = min((i for i in (text.find("{"), text.find("[")) if i >= 0), default=-1)
    if start >= 0:
        candidates.append(_balanced(text, start))
    errors = []
    for candidate in candidates:
        if not candidate:
            continue
        try:
            return json.loads(candidate)
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


def parse_plans(text: str, max_plans: int, banned: Sequence[str] = ()) -> list[Plan]:
    """Plans from a planner reply: at most ``max_plans``, banned directions dropped.

    Rejects: no JSON, no "plans" list, items without a direction/description,
    and a reply whose every plan is banned or duplicated.
    """
    from workflows.search_policy import is_banned, normalize_direction

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

    Takes the last ```python block that defines a Triton kernel; rejects a
    reply without one, with a syntax error, or defining none of
    ``entry_points`` (when given) at module level.
    """
    if not text or not text.strip():
        raise LLMReplyError("the reply is empty")
    blocks = [body for lang, body in code_blocks(text) if lang in ("python", "py", "")]
    if not blocks:
        raise LLMReplyError("the reply has no ```python code block")
    kernels = [b for b in blocks if "@triton.jit" in b or "triton.jit(" in b]
    if not kernels:
        raise LLMReplyError("no ```python block defines a @triton.jit kernel")
    source = kernels[-1].strip() + "\n"
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        raise LLMReplyError(
            f"the module does not parse: line {exc.lineno}: {exc.msg}"
            + (f"\n    {exc.text.rstrip()}" if exc.text else "")
        ) from None
    if entry_points:
        defined = _top_level_names(tree)
        if not any(name in defined for name in entry_points):
            raise LLMReplyError(
                "the module defines none of the required entry points "
                f"({', '.join(entry_points)}); it defines: {', '.join(sorted(defined)) or 'nothing'}"
            )
    return source


def _top_level_names(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return names


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
