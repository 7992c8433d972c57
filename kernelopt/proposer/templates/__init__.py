"""Expert templates: Triton kernels we wrote for common op families, matched by ATen pattern."""

from __future__ import annotations

from kernelopt.proposer.templates.argreduce import ArgReduceTemplate
from kernelopt.proposer.templates.base import KernelView, Template, TemplateMatch
from kernelopt.proposer.templates.norm import NormTemplate
from kernelopt.proposer.templates.reduce import ReduceTemplate
from kernelopt.proposer.templates.scan import ScanTemplate
from kernelopt.proposer.templates.softmax import SoftmaxTemplate

TEMPLATES: tuple[Template, ...] = (
    SoftmaxTemplate(),
    NormTemplate(),
    ReduceTemplate(),
    ArgReduceTemplate(),
    ScanTemplate(),
)


def matches(view: KernelView) -> list[tuple[Template, TemplateMatch]]:
    """Every template that recognises the kernel, in library order."""
    out = []
    for template in TEMPLATES:
        found = template.match(view)
        if found is not None:
            out.append((template, found))
    return out


def by_name(name: str) -> Template | None:
    return next((t for t in TEMPLATES if t.name == name), None)
