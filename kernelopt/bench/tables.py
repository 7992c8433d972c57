"""Tables as rows of strings, rendered to Markdown and HTML from one build.

Shared by the suite report and the GPU-cost section, so both formats of every
table come from the same rows and can never disagree.
"""

from __future__ import annotations

import html

Table = tuple[list[str], list[list[str]]]


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|")


def md_table(table: Table) -> list[str]:
    head, rows = table
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in rows]
    return lines


def html_table(table: Table) -> str:
    head, rows = table
    th = "".join(f"<th>{html.escape(h)}</th>" for h in head)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in rows
    )
    return f"<table><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>"
