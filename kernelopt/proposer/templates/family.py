"""The expert-template family: match the target's ATen fragment, instantiate, walk the grid."""

from __future__ import annotations

import re

from kernelopt.contracts.compiled import TargetKind
from kernelopt.contracts.search import BuiltinProposeInput, BuiltinVariant
from kernelopt.proposer.fragment import fragment_for
from kernelopt.proposer.templates import by_name, matches
from kernelopt.proposer.templates.base import (
    KernelView,
    Template,
    TemplateMatch,
    label,
    read_header,
)
from kernelopt.store import ArtifactStore

FAMILY = "template"


def kernel_view(inp: BuiltinProposeInput, store: ArtifactStore) -> KernelView | None:
    """The target's single kernel with its fragment and launch arguments, when it has both."""
    if inp.target.kind != TargetKind.KERNEL or len(inp.target.kernels) != 1:
        return None
    name = inp.target.kernels[0]
    kernel = next((k for k in inp.segment.kernels if k.name == name), None)
    if kernel is None or len(kernel.launches) > 1:
        return None  # several launches with different arguments: one launch(...) cannot serve
    wrapper = store.get_text(inp.compiled.wrapper)
    fragment = fragment_for(wrapper, name)
    if fragment is None:
        return None
    sms = re.search(r"multi_processor_count=(\d+)", wrapper)
    return KernelView(
        name=name,
        fragment=fragment,
        args=list(kernel.args),
        sm_count=int(sms.group(1)) if sms else 132,
    )


def _variant(
    store: ArtifactStore, template: Template, found: TemplateMatch, params: dict[str, int]
) -> BuiltinVariant:
    tag = label(template.name, params)
    text = template.render(found, params)
    slug = "".join(c if c.isalnum() else "_" for c in tag)[:80]
    return BuiltinVariant(
        label=tag,
        source=store.put_text(text, "text/x-python", f"{slug}.py"),
        config=params,
        description=f"expert template {template.name} ({found.what})",
    )


def propose_templates(
    inp: BuiltinProposeInput, store: ArtifactStore, source: str, count: int, exclude: set[str]
) -> tuple[list[BuiltinVariant], str]:
    """Up to ``count`` template candidates: grid neighbours of a template state, or the best
    grid points of every template that matches a root kernel (round robin)."""
    if count <= 0:
        return [], ""
    header = read_header(source)
    if header is not None:
        found, params = header
        template = by_name(found.template)
        if template is None:
            return [], f"unknown template {found.template!r}"
        sms = 132
        grid = template.grid(found, sms)
        grid.sort(key=lambda p: _distance(p, params))
        picks = [p for p in grid if label(template.name, p) not in exclude and p != params]
        return [_variant(store, template, found, p) for p in picks[:count]], ""
    view = kernel_view(inp, store)
    if view is None:
        return [], ""
    found_all = matches(view)
    if not found_all:
        return [], ""
    queues = [
        [(t, m, p) for p in t.grid(m, view.sm_count) if label(t.name, p) not in exclude]
        for t, m in found_all
    ]
    out: list[BuiltinVariant] = []
    while len(out) < count and any(queues):
        for queue in queues:
            if queue and len(out) < count:
                template, found, params = queue.pop(0)
                out.append(_variant(store, template, found, params))
    note = "" if out else "template grid exhausted after exclusions"
    return out, note


def _distance(a: dict[str, int], b: dict[str, int]) -> tuple[int, str]:
    """Coordinate-descent order: points that differ from ``b`` in fewer knobs come first."""
    diff = sum(1 for k in a if a.get(k) != b.get(k))
    return diff, label("", a)
