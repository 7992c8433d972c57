"""The fact sections of the planner and executor prompts, rendered from the target's data.

Each function turns one contract (the target's signature, its ``PromptFacts``,
the hardware) into a few lines of plain text.  No problem name, shape or
per-problem table lives here: every number comes from the data passed in, and
a missing measurement is said to be missing rather than guessed.
"""

from __future__ import annotations

import ast
import re

from kernelopt.contracts import data_movement
from kernelopt.contracts.compiled import KernelArg, SearchTarget, TargetKind
from kernelopt.contracts.search import Hardware, PromptFacts

_METADATA_KEYWORDS = ("triton_meta", "inductor_meta")


def _fmt_ms(ms: float | None) -> str:
    if ms is None:
        return "not measured"
    return f"{ms * 1000:.2f} us" if ms < 1.0 else f"{ms:.3f} ms"


def _fmt_bytes(n: int | None) -> str:
    if n is None:
        return "unknown"
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            return f"{n / size:.2f} {unit} ({n} B)"
    return f"{n} B"


def signature_table(target: SearchTarget) -> str:
    """Markdown table of what a launch(*args) receives: position, name, wrapper expr, role, layout."""
    if not target.signature:
        return "(no signature recorded for this target)"
    rows = [
        "| # | parameter | wrapper expr | role | shape | stride | dtype / value |",
        "|---|---|---|---|---|---|---|",
    ]
    for i, arg in enumerate(target.signature):
        rows.append(_row(i, arg))
    return "\n".join(rows)


def _row(i: int, arg: KernelArg) -> str:
    if arg.tensor is not None:
        t = arg.tensor
        shape, stride, what = str(list(t.shape)), str(list(t.stride)), t.dtype
    else:
        shape = stride = "-"
        what = f"= {arg.value!r}" if arg.value is not None else "scalar"
    return f"| {i} | {arg.name} | {arg.expr or '-'} | {arg.role or '-'} | {shape} | {stride} | {what} |"


def launch_text(facts: PromptFacts | None, target: SearchTarget) -> str:
    """The wrapper's launch line(s) of the target and its grid (forward targets: none)."""
    if target.kind == TargetKind.FORWARD:
        return "(the forward's inputs, as Model.forward receives them; outputs are returned)"
    if facts is None or not facts.launches:
        return "(launch line not provided)"
    lines = [f"- {line}" for line in facts.launches]
    if facts.grid:
        lines.append(f"- grid: {facts.grid}")
    lines.extend(facts.launch_configs)
    lines.extend(facts.neighbours)
    return "\n".join(lines)


def hardware_text(hardware: Hardware | None, facts: PromptFacts | None = None) -> str:
    """The GPU, and the PyTorch and Triton the GPU worker runs candidates with.

    The versions are the worker's (its profile, else the compile record), never the
    prompt builder's: a model that knows them writes to that API instead of hedging.
    """
    text = _device_text(hardware)
    versions = software_text(hardware, facts)
    return f"{text}\n{versions}" if versions else text


def software_text(hardware: Hardware | None, facts: PromptFacts | None) -> str:
    """One line naming the worker's PyTorch and Triton versions; empty when neither is known."""
    if hardware is not None and (hardware.torch_version or hardware.triton_version):
        torch, triton, where = hardware.torch_version, hardware.triton_version, "the GPU worker"
    elif facts is not None and (facts.torch_version or facts.triton_version):
        torch, triton = facts.torch_version, facts.triton_version
        where = "the GPU worker's compile record"
    else:
        return ""
    return f"Software: PyTorch {torch or 'unknown'}, Triton {triton or 'unknown'} (from {where})"


def _device_text(hardware: Hardware | None) -> str:
    if hardware is None:
        return "(hardware not provided)"
    parts = [hardware.name]
    if hardware.compute_capability:
        parts.append(f"compute capability {hardware.compute_capability}")
    parts.append(f"{hardware.sm_count} SMs" if hardware.sm_count else "SM count unknown")
    parts.append(
        f"{hardware.bandwidth_gbs:.0f} GB/s memory bandwidth"
        if hardware.bandwidth_gbs
        else "bandwidth unknown"
    )
    parts.append(f"L2 {_fmt_bytes(hardware.l2_bytes)}" if hardware.l2_bytes else "L2 size unknown")
    text = ", ".join(parts)
    return text + (f" [{hardware.source}]" if hardware.source else "")


def numbers_text(
    facts: PromptFacts | None, hardware: Hardware | None, kind: TargetKind = TargetKind.KERNEL
) -> str:
    """Baseline time, share of the forward, required speedup (Amdahl), bytes-moved floor.

    When the floor leaves less headroom than the required speedup, a line says so
    plainly, with what could still help (``headroom_text``).
    """
    if facts is None:
        return "(baseline numbers not provided)"
    lines = [
        f"- baseline (Inductor) time of this target: {_fmt_ms(facts.baseline_ms)} per forward"
        + (f" ({facts.baseline_note})" if facts.baseline_note else ""),
        _forward_line(facts),
        f"- required speedup of this target for the forward to gain gamma = {facts.gamma:.3f}: "
        + (f"{facts.required_speedup:.3f}x" if facts.required_speedup else "n/a")
        + (f" ({facts.required_note})" if facts.required_note else ""),
    ]
    floor = facts.bytes_floor
    bandwidth = hardware.bandwidth_gbs if hardware else None
    if floor is not None:
        line = (
            f"- bytes-moved floor: {_fmt_bytes(floor)} (read {_fmt_bytes(facts.bytes_in)}, "
            f"written {_fmt_bytes(facts.bytes_out)}; {facts.bytes_note})"
        )
        if bandwidth:
            floor_ms = data_movement.floor_ms(floor, bandwidth)
            line += f" = {_fmt_ms(floor_ms)} at {bandwidth:.0f} GB/s"
            if facts.baseline_ms:
                line += (
                    f"; the baseline takes {facts.baseline_ms / floor_ms:.1f}x that floor "
                    f"({floor_ms / facts.baseline_ms:.0%} of the bandwidth)"
                )
        lines.append(line)
        if bandwidth:
            lines.extend(headroom_text(facts, bandwidth, kind))
    lines.append(
        '- "faster" means: gate 4 times the whole forward called from Python (launch and host '
        "time included) with this target's code in place, against the baseline's; the search "
        "ranks candidates by that time, and a result is kept only if it is at least "
        f"{facts.gamma:.3f}x faster than Inductor's (fresh processes, L2 flushed)."
    )
    return "\n".join(lines)


def _forward_line(facts: PromptFacts) -> str:
    share = f"{facts.share:.1%}" if facts.share is not None else "not measured"
    if not facts.dispatched_ms or not facts.forward_ms:
        return f"- whole forward: {_fmt_ms(facts.forward_ms)}; this target's share: {share}"
    host = facts.dispatched_ms - facts.forward_ms
    return (
        f"- whole forward: {_fmt_ms(facts.forward_ms)} of GPU time in its kernels, "
        f"{_fmt_ms(facts.dispatched_ms)} as gate 4 times it (called from Python: "
        f"{_fmt_ms(host)}, {host / facts.dispatched_ms:.0%}, is launch and host time, which a "
        "faster kernel does not shrink and extra launches or Python work per call add to); "
        f"this target's share of the timed forward: {share}"
    )


def headroom_text(facts: PromptFacts, bandwidth_gbs: float, kind: TargetKind) -> list[str]:
    """One line when bandwidth alone cannot give the target its required speedup, else none.

    Near its bytes-moved floor a target cannot reach gamma by using the bandwidth
    better; saying so keeps a search from spending its rounds on that.
    """
    floor = facts.bytes_floor or 0
    headroom = data_movement.bandwidth_headroom(facts.baseline_ms, floor, bandwidth_gbs)
    required = facts.required_speedup
    if (
        headroom is None
        or required is None
        or not data_movement.short_of_headroom(headroom, required)
    ):
        return []
    what = "the whole forward" if kind == TargetKind.FORWARD else "this target alone"
    fewer = (
        "not re-reading data, or not reading the parts of an input or parameter the outputs do "
        "not need (the floor already counts intermediates as never leaving the chip)"
        if kind == TargetKind.FORWARD
        else "not re-reading data, reading only the part of an argument the outputs need, or "
        "fusing with a neighbouring kernel's read or write (a fusion-group or whole-forward "
        "target; this target's launch must still write all of its outputs)"
    )
    return [
        f"- bandwidth headroom {headroom:.3f}x < required {required:.3f}x: {what} cannot reach "
        f"gamma = {facts.gamma:.3f} by using the bandwidth better, however well it is tuned. Only "
        f"moving fewer bytes could: {fewer}. A cheaper data type is NOT allowed: outputs must "
        "match the float32 reference."
    ]


def precision_text(facts: PromptFacts | None) -> str:
    """The numerics rules, with the gates' tolerances (the same for every problem)."""
    f = facts or PromptFacts()
    return "\n".join(
        [
            "- Exact fp32 semantics: compute and accumulate in float32; no fp16/bf16/TF32 "
            "shortcuts. TF32 is OFF on both sides: a tl.dot on fp32 inputs must use "
            'input_precision="ieee".',
            "- No fast math: no approximate intrinsics (fast exp/log/rsqrt/division variants). "
            "A rewrite that is exact in real arithmetic (reordered or split sums, a different "
            "but equivalent formula, multiplying by a reciprocal) is allowed when its float32 "
            "results pass the checks below; the checks, not the kind of rewrite, decide.",
            f"- Per call (gate 2): every output element within atol {f.atol:g} + rtol {f.rtol:g} x "
            "|reference| of the float32 reference, on several seeds, a held-out seed and new "
            "values written into the same buffers; every output element must be written.",
            f"- End to end (gate 3): the whole model with your code must match within "
            f"{f.model_tolerance:g}; otherwise, against a float64 reference, its error may be at "
            f"most {f.rho_max:g}x the baseline's own float64 error.",
        ]
    )


def trim_metadata(source: str) -> str:
    """Inductor's ``triton_meta=`` / ``inductor_meta=`` decorator arguments shown as ``...``.

    They are compiler bookkeeping (device properties, hashes, autotune flags),
    often half of a kernel's text, and a launch(*args) reply does not need
    them.  Unparseable text is returned as it is.
    """
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return source
    starts = [0]
    for line in source.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    encoded_lines = source.splitlines(keepends=True)

    def offset(lineno: int, col: int) -> int:
        line = encoded_lines[lineno - 1]
        return starts[lineno - 1] + len(line.encode("utf-8")[:col].decode("utf-8", "replace"))

    spans: list[tuple[int, int]] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for deco in node.decorator_list:
            if not isinstance(deco, ast.Call):
                continue
            for kw in deco.keywords:
                value = kw.value
                if kw.arg in _METADATA_KEYWORDS and value.end_lineno is not None:
                    start = offset(value.lineno, value.col_offset)
                    end = offset(value.end_lineno, value.end_col_offset or 0)
                    spans.append((start, end))
    for start, end in sorted(spans, reverse=True):
        source = source[:start] + "..." + source[end:]
    return source


def strip_header(source: str) -> str:
    """Drop blank runs left by trimming (three or more newlines become two)."""
    return re.sub(r"\n{3,}", "\n\n", source)


def contract_form(target: SearchTarget, full: str) -> str:
    """Only the part of the candidate contract that applies to the target's kind.

    ``full`` is ``compile.contract.CANDIDATE_CONTRACT`` (numbered forms 1-3,
    then "Never:"): cutting it here keeps one source for the prompt and
    ``detect_form``.  If its layout is not recognised, the whole text is used.
    """
    forms = _numbered_forms(full)
    never = full[full.find("Never:") :].strip() if "Never:" in full else ""
    if forms is None:
        return full
    intro, _one, two, three = forms
    if target.kind == TargetKind.FORWARD:
        body = three
    else:
        keep = "- single kernel:" if target.kind == TargetKind.KERNEL else "- fusion group:"
        drop = "- fusion group:" if target.kind == TargetKind.KERNEL else "- single kernel:"
        body = _drop_bullet(two, drop)
        if keep not in body:
            return full
    body = re.sub(r"^\d\. [^:]*:\s*", "", body.strip())
    body = re.sub(r"\n {3}(?=\S| )", "\n", body[:1].upper() + body[1:])
    return "\n".join(p for p in (intro.strip(), body, never) if p)


def _numbered_forms(full: str) -> tuple[str, str, str, str] | None:
    marks = [full.find(f"\n{i}. ") for i in (1, 2, 3)]
    end = full.find("\nNever:")
    if min(marks) < 0 or end < 0 or not marks[0] < marks[1] < marks[2] < end:
        return None
    return (
        full[: marks[0]],
        full[marks[0] : marks[1]],
        full[marks[1] : marks[2]],
        full[marks[2] : end],
    )


def _drop_bullet(text: str, bullet: str) -> str:
    """Remove one '- name:' bullet and its indented continuation lines."""
    out: list[str] = []
    skipping = False
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith(bullet):
            skipping = True
            continue
        if skipping and stripped.startswith("- "):
            skipping = False
        if not skipping:
            out.append(line)
    return "\n".join(out)


def required_names(target: SearchTarget) -> list[str]:
    """What the prompt asks the module to define (the form shown)."""
    return ["ModelNew"] if target.kind == TargetKind.FORWARD else ["launch"]
