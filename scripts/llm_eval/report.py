"""The outcome table: one row per problem, from the campaigns' audits and the reply folder."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from temporalio.client import Client
from temporalio.service import RPCError

from kernelopt.agents import reply_folder
from kernelopt.config import Settings
from kernelopt.errors import KernelOptError
from scripts.llm_eval.record import EvalManifest
from scripts.llm_eval.stream import now

REPLY_ROLES = ("execute", "retry_fix")  # replies that become candidates


def llm_counts(folder: reply_folder.Folders) -> dict[str, dict[str, Counter]]:
    """campaign -> role -> {asked, answered, waiting, withdrawn}, from the reply folder."""
    out: dict[str, dict[str, Counter]] = {}
    for part, label in (
        ("requests", "waiting"),
        ("answered", "answered"),
        ("withdrawn", "withdrawn"),
    ):
        directory = folder.root / part
        if not directory.is_dir():
            continue
        for path in directory.glob("*.json"):
            try:
                doc = json.loads(path.read_text())
            except (OSError, ValueError):
                continue
            roles = out.setdefault(doc.get("campaign_id", ""), {})
            counts = roles.setdefault(doc.get("role", "?"), Counter())
            counts["asked"] += 1
            counts[label] += 1
    return out


def candidate_counts(audit: Any) -> dict[str, Any]:
    """How the campaign's candidates fared, gate by gate, from its audit."""
    from kernelopt.contracts.verdicts import GateName

    cands = list(audit.candidates)

    def passed(c: Any, gate: GateName) -> bool:
        return any(v.gate == gate and v.passed for v in c.verdicts)

    trials = list(audit.model_trials)
    return {
        "candidates": len(cands),
        "parsed": sum(1 for c in cands if c.deciding_gate != "parse"),
        "compiled": sum(1 for c in cands if passed(c, GateName.STATIC)),
        "correct": sum(1 for c in cands if passed(c, GateName.CORRECTNESS)),
        "passed_1_2": sum(1 for c in cands if c.passed_gates_1_2),
        "float64_in_search": sum(1 for c in cands if passed(c, GateName.MODEL)),
        "model_trials": len(trials),
        "gate3_passed": sum(
            1 for t in trials if any(v.gate == GateName.MODEL and v.passed for v in t.verdicts)
        ),
        "gate4_passed": sum(
            1
            for t in trials
            if any(v.gate == GateName.PERFORMANCE and v.passed for v in t.verdicts)
        ),
        "shipped": sum(1 for c in cands if c.final == "shipped"),
        "stopped_by": dict(Counter(c.deciding_gate for c in cands if c.deciding_gate)),
        "best_kernel_speedup": max((c.speedup for c in cands if c.speedup), default=None),
        # gate 4 on the candidate's own target (kernel level), before any re-stitched model
        "kernel_speedups": sorted((round(c.speedup, 3) for c in cands if c.speedup), reverse=True),
        "audit_checks_failed": [c.name for c in audit.checks if not c.ok],
    }


async def report_rows(client: Client, settings: Settings, manifest: EvalManifest) -> list[dict]:
    """One row per problem: outcome, speedup, candidates and gates, replies, tokens, GPU-s."""
    from kernelopt.audit import load_report
    from kernelopt.store import open_store

    store = open_store(settings.artifacts_dir)
    counts = llm_counts(reply_folder.folders(settings.llm_dir))
    rows = []
    for problem in manifest.problems:
        row: dict[str, Any] = {
            "problem": problem.name,
            "level": problem.level,
            "path": problem.path,
            "campaign_id": problem.campaign_id,
        }
        if not problem.campaign_id:
            rows.append(row | {"status": "not submitted", "error": problem.error})
            continue
        roles = counts.get(problem.campaign_id, {})
        row["llm"] = {role: dict(c) for role, c in sorted(roles.items())}
        row["replies"] = sum(roles.get(r, Counter())["answered"] for r in REPLY_ROLES)
        try:
            audit = await load_report(client, problem.campaign_id, store)
        except (KernelOptError, RPCError) as exc:
            rows.append(row | {"status": "unknown", "error": str(exc)[:300]})
            continue
        o = audit.outcome
        t = (o.triage or o.triage_ref) if o is not None else None
        row |= {
            "status": audit.status,
            "phase": audit.phase,
            "outcome": o.category.value if o else "",
            "speedup": o.speedup if o else None,
            "baseline_ms": o.baseline_ms if o else None,
            "optimized_ms": o.optimized_ms if o else None,
            "library_fraction": t.library_fraction if t is not None else None,
            "reason": o.reason if o else "",
            "tokens": audit.used.tokens,
            "gpu_seconds": round(audit.used.gpu_seconds, 1),
            "targets": len(audit.targets),
            **candidate_counts(audit),
        }
        rows.append(row)
    return rows


def _cell(value: Any, spec: str = "") -> str:
    if value is None or value == "":
        return "-"
    return f"{value:{spec}}" if spec else str(value)


def report_markdown(rows: list[dict], manifest: EvalManifest, title: str) -> str:
    search = manifest.options.get("search", {})
    lines = [
        f"# {title}",
        "",
        f"{now()}; {len(manifest.calls)} call(s) so far; search: T={search.get('iterations')} "
        f"N={search.get('plans')} K={search.get('retries')} beam={search.get('beam')}, "
        f"max targets {manifest.options.get('max_targets')}, gamma {manifest.options.get('gamma')}.",
        "",
        "| problem | status | outcome | speedup | f | candidates | replies | parsed | compiled "
        "| correct | passed 1-2 | best kernel | gate 3 | gate 4 | shipped | tokens | GPU-s |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            "| "
            + " | ".join(
                [
                    r["problem"],
                    _cell(r.get("status")),
                    _cell(r.get("outcome")),
                    "-" if r.get("speedup") is None else f"{r['speedup']:.3f}x",
                    _cell(r.get("library_fraction"), ".3f"),
                    _cell(r.get("candidates")),
                    _cell(r.get("replies")),
                    _cell(r.get("parsed")),
                    _cell(r.get("compiled")),
                    _cell(r.get("correct")),
                    _cell(r.get("passed_1_2")),
                    "-"
                    if r.get("best_kernel_speedup") is None
                    else f"{r['best_kernel_speedup']:.3f}x",
                    _cell(r.get("gate3_passed")),
                    _cell(r.get("gate4_passed")),
                    _cell(r.get("shipped")),
                    _cell(r.get("tokens")),
                    _cell(r.get("gpu_seconds")),
                ]
            )
            + " |"
        )
    lines += [
        "",
        "candidates: every reply-built candidate (execute and retry-fix); replies: executor and "
        "retry-fix replies collected; best kernel: the best speedup gate 4 measured for a "
        "candidate on its own target; gate 3 / gate 4: re-stitched models that passed V_model / "
        "V_perf; tokens and GPU-s count finished target searches (a running campaign's current "
        "search adds its own when it ends); tokens are estimated from the text in folder mode "
        "(4 characters a token).",
        "",
    ]
    for r in rows:
        notes = []
        if r.get("stopped_by"):
            notes.append(
                "stopped by " + ", ".join(f"{k} {v}" for k, v in sorted(r["stopped_by"].items()))
            )
        if r.get("llm"):
            notes.append(
                "requests "
                + ", ".join(
                    f"{role} {c.get('answered', 0)}/{c.get('asked', 0)}"
                    + (f" ({c['waiting']} waiting)" if c.get("waiting") else "")
                    for role, c in r["llm"].items()
                )
            )
        if r.get("kernel_speedups"):
            notes.append(
                "candidates timed on their target: "
                + ", ".join(f"{x:.3g}x" for x in r["kernel_speedups"])
            )
        if r.get("reason"):
            notes.append(r["reason"])
        if r.get("error"):
            notes.append("error: " + r["error"])
        if r.get("audit_checks_failed"):
            notes.append("audit checks failed: " + ", ".join(r["audit_checks_failed"]))
        if notes:
            lines.append(
                f"* **{r['problem']}** ({r.get('campaign_id') or '-'}): " + "; ".join(notes)
            )
    lines += [
        "",
        "| call | command | host | started | seconds | replies delivered | skipped | stopped |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for i, c in enumerate(manifest.calls, 1):
        cells = [str(i), c.command, c.host, c.started_at, f"{c.seconds:.0f}"]
        cells += [str(c.replies_delivered), str(c.replies_skipped), c.stopped or "(this call)"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
