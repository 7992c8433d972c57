"""Prompt token budgets: estimate, then cut the largest inputs on purpose.

Token counts are estimated as characters / 4 (``CHARS_PER_TOKEN``), the usual
rule of thumb for English and code with BPE tokenizers; the endpoint's own
count is recorded afterwards in the ledger.  Each role has a budget for its
whole request (system + user messages).  When the facts and sources exceed
it, the largest cuttable section (the kernel source, Inductor's kernels, the
experience, the profile -- never the contract, the plan or the numbers) is
cut in the middle, and the cut says where and how much.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

CHARS_PER_TOKEN = 4
# per role, the whole request (all messages sent), in estimated tokens
BUDGETS = {"planner": 6000, "executor": 8000, "retry": 9500, "summarizer": 3000}
MIN_KEEP_CHARS = 600  # a cut section keeps at least this much of its head and tail


def estimate_tokens(text: str) -> int:
    """Estimated tokens of a text: ceil(chars / 4)."""
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def messages_tokens(messages: list[dict[str, str]]) -> int:
    """Estimated tokens of a chat request (contents only; role overhead is small)."""
    return sum(estimate_tokens(m.get("content", "")) for m in messages)


@dataclass
class Section:
    """One named field of a prompt template; ``cuttable`` ones may be shortened."""

    name: str
    text: str
    cuttable: bool = False


def cut_middle(text: str, keep: int, name: str, budget: int) -> str:
    """Keep the head (2/3) and tail (1/3) of ``text`` in ``keep`` chars, marking the cut."""
    if len(text) <= keep:
        return text
    keep = max(keep, MIN_KEEP_CHARS)
    head = keep * 2 // 3
    tail = keep - head
    cut = len(text) - head - tail
    marker = (
        f"\n[... {cut} characters of the {name} cut here to keep this prompt within its "
        f"~{budget}-token budget ...]\n"
    )
    return text[:head] + marker + text[len(text) - tail :]


def fit_sections(sections: list[Section], fixed_chars: int, budget_tokens: int) -> dict[str, str]:
    """Section texts shortened so that ``fixed_chars`` + all sections fit the budget.

    The largest cuttable section is cut first, down to what is needed (or to
    the largest of the others, then both share the cut), so small inputs stay
    whole.
    """
    limit = budget_tokens * CHARS_PER_TOKEN
    texts = {s.name: s.text for s in sections}
    cuttable = [s.name for s in sections if s.cuttable]
    for _ in range(4 * len(cuttable) + 1):
        over = fixed_chars + sum(len(t) for t in texts.values()) - limit
        if over <= 0 or not cuttable:
            break
        ranked = sorted(cuttable, key=lambda n: -len(texts[n]))
        largest = ranked[0]
        if len(texts[largest]) <= MIN_KEEP_CHARS + 200:
            break  # everything cuttable is already small: the budget cannot be met
        second = len(texts[ranked[1]]) if len(ranked) > 1 else 0
        target = max(len(texts[largest]) - over - 200, second, MIN_KEEP_CHARS)
        texts[largest] = cut_middle(texts[largest], target, largest, budget_tokens)
    return texts
