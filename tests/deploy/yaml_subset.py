"""A strict reader for the YAML subset our deploy files use (tests only).

PyYAML is not a dependency, and the deploy files should not have to be JSON to
be checked.  This reads block mappings and sequences, flow sequences and flow
mappings of scalars, quoted and plain scalars, comments, and ``---`` document
separators -- and raises ``YamlSubsetError`` on anything else (anchors, block
scalars, tabs, bad indentation), so a file that drifts out of the subset fails
the tests instead of being misread.  Where PyYAML is installed, a test checks
that both read every deploy file identically.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any


class YamlSubsetError(ValueError):
    pass


@dataclass
class _Line:
    number: int
    indent: int
    text: str


_INT = re.compile(r"^[-+]?[0-9]+$")
_FLOAT = re.compile(r"^[-+]?([0-9]+\.[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?$")


def _strip_comment(raw: str) -> str:
    """Drop a trailing comment: '#' at the start or after a space, outside quotes."""
    quote: str | None = None
    for i, ch in enumerate(raw):
        if quote:
            if ch == quote:
                quote = None
        elif ch in "\"'" and (i == 0 or raw[i - 1] in " [{,:-"):
            quote = ch
        elif ch == "#" and (i == 0 or raw[i - 1] in " \t"):
            return raw[:i].rstrip()
    return raw.rstrip()


def _documents(text: str) -> list[list[_Line]]:
    docs: list[list[_Line]] = [[]]
    for number, raw in enumerate(text.splitlines(), start=1):
        if "\t" in raw[: len(raw) - len(raw.lstrip())]:
            raise YamlSubsetError(f"line {number}: tab in indentation")
        if raw.strip() == "---":
            docs.append([])
            continue
        content = _strip_comment(raw)
        if not content.strip():
            continue
        indent = len(content) - len(content.lstrip(" "))
        docs[-1].append(_Line(number, indent, content.strip()))
    return [doc for doc in docs if doc]


def _split_flow(body: str, number: int) -> list[str]:
    parts, depth, quote, current = [], 0, None, ""
    for ch in body:
        if quote:
            current += ch
            if ch == quote:
                quote = None
            continue
        if ch in "\"'":
            quote = ch
        elif ch in "[{":
            depth += 1
        elif ch in "]}":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(current.strip())
            current = ""
            continue
        current += ch
    if quote or depth:
        raise YamlSubsetError(f"line {number}: unbalanced flow collection")
    if current.strip():
        parts.append(current.strip())
    return parts


def _key_split(text: str) -> tuple[str, str] | None:
    """'key: rest' or 'key:' -> (key, rest); None when the text is not a mapping entry."""
    if text.startswith(('"', "'")):
        quote = text[0]
        end = text.find(quote, 1)
        if end > 0 and text[end + 1 : end + 2] == ":" and text[end + 2 : end + 3] in ("", " "):
            return text[1:end], text[end + 2 :].strip()
        return None
    if text.startswith(("[", "{")):
        return None
    cut = text.find(": ")
    if cut == -1:
        return (text[:-1], "") if text.endswith(":") else None
    return text[:cut], text[cut + 2 :].strip()


def scalar(text: str, number: int = 0) -> Any:
    """One scalar or flow collection."""
    if text.startswith(("&", "*", "!", "|", ">", "%", "@", "`")):
        raise YamlSubsetError(f"line {number}: unsupported YAML construct {text[:10]!r}")
    if text.startswith("["):
        if not text.endswith("]"):
            raise YamlSubsetError(f"line {number}: flow sequence must end on its line")
        return [scalar(part, number) for part in _split_flow(text[1:-1], number)]
    if text.startswith("{"):
        if not text.endswith("}"):
            raise YamlSubsetError(f"line {number}: flow mapping must end on its line")
        out: dict[str, Any] = {}
        for part in _split_flow(text[1:-1], number):
            split = _key_split(part)
            if split is None:
                raise YamlSubsetError(f"line {number}: bad flow mapping entry {part!r}")
            out[split[0]] = scalar(split[1], number) if split[1] else None
        return out
    if text.startswith('"'):
        if not text.endswith('"') or len(text) < 2:
            raise YamlSubsetError(f"line {number}: unterminated double-quoted string")
        return json.loads(text)
    if text.startswith("'"):
        if not text.endswith("'") or len(text) < 2:
            raise YamlSubsetError(f"line {number}: unterminated single-quoted string")
        return text[1:-1].replace("''", "'")
    if text in ("true", "True", "TRUE"):
        return True
    if text in ("false", "False", "FALSE"):
        return False
    if text in ("null", "Null", "NULL", "~", ""):
        return None
    if _INT.match(text):
        return int(text)
    if _FLOAT.match(text):
        return float(text)
    return text


class _Parser:
    def __init__(self, lines: list[_Line]) -> None:
        self.lines = lines
        self.i = 0

    def block(self, indent: int) -> Any:
        line = self.lines[self.i]
        if line.indent != indent:
            raise YamlSubsetError(f"line {line.number}: unexpected indentation")
        if line.text == "-" or line.text.startswith("- "):
            return self.sequence(indent)
        return self.mapping(indent)

    def _nested(self, parent_indent: int, number: int, allow_same_seq: bool) -> Any:
        if self.i >= len(self.lines):
            return None
        nxt = self.lines[self.i]
        if nxt.indent > parent_indent:
            return self.block(nxt.indent)
        if allow_same_seq and nxt.indent == parent_indent and nxt.text.startswith("- "):
            return self.sequence(parent_indent)
        return None

    def mapping(self, indent: int) -> dict[str, Any]:
        out: dict[str, Any] = {}
        while self.i < len(self.lines):
            line = self.lines[self.i]
            if line.indent < indent:
                break
            if line.indent > indent:
                raise YamlSubsetError(f"line {line.number}: unexpected indentation")
            if line.text.startswith("- ") or line.text == "-":
                break
            split = _key_split(line.text)
            if split is None:
                raise YamlSubsetError(f"line {line.number}: expected 'key: value': {line.text!r}")
            key, rest = split
            if key in out:
                raise YamlSubsetError(f"line {line.number}: duplicate key {key!r}")
            self.i += 1
            if rest:
                out[key] = scalar(rest, line.number)
            else:
                out[key] = self._nested(indent, line.number, allow_same_seq=True)
        return out

    def sequence(self, indent: int) -> list[Any]:
        out: list[Any] = []
        while self.i < len(self.lines):
            line = self.lines[self.i]
            if line.indent != indent or not (line.text == "-" or line.text.startswith("- ")):
                if line.indent > indent:
                    raise YamlSubsetError(f"line {line.number}: unexpected indentation")
                break
            item = line.text[1:].strip()
            if not item:
                self.i += 1
                out.append(self._nested(indent, line.number, allow_same_seq=False))
            elif _key_split(item) is not None and not item.startswith(("[", "{")):
                # "- key: value": a mapping whose first entry sits on the dash line
                self.lines[self.i] = _Line(line.number, indent + 2, item)
                out.append(self.mapping(indent + 2))
            else:
                self.i += 1
                out.append(scalar(item, line.number))
        return out


def loads_all(text: str) -> list[Any]:
    docs = []
    for lines in _documents(text):
        parser = _Parser(lines)
        docs.append(parser.block(lines[0].indent))
        if parser.i != len(lines):
            line = lines[parser.i]
            raise YamlSubsetError(f"line {line.number}: unexpected content {line.text!r}")
    return docs


def load(path: Path) -> Any:
    docs = loads_all(path.read_text())
    if len(docs) != 1:
        raise YamlSubsetError(f"{path}: expected one document, found {len(docs)}")
    return docs[0]
