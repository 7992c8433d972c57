"""The LLM search end to end on the GPU host, with scripted replies over real HTTP.

    source scripts/device_env.sh; python3 -m tests.e2e.llm_campaign [--deadline S] [--problems P ...]

(``tests/e2e/test_gpu_llm_campaigns.py`` runs it as a GPU test; CI runs ``--check-only``.)
Like ``scripts/gpu_e2e.py`` (embedded Temporal server, the local workers
``kernelopt optimize`` starts, one campaign per problem), but the proposer is
the LLM path: ``tests/support/scripted_openai.py``'s server runs in this
process and the CPU worker's planner / executor / retry-fix / summarizer
activities talk to it over HTTP like to any OpenAI-compatible endpoint.
Nothing is mocked on the GPU side: compile, triage, ncu profile, gates 1-2,
re-timing, re-stitch and gates 3-4 are the real ones.

Each problem runs in single-kernel mode (the search target is the whole
forward, a candidate is a ``ModelNew`` module) with one iteration of four
plans whose replies are scripted in ``tests/support/llm_replies.py``:

* ``good``          a correct, fast Triton ``ModelNew`` -> accepted
* ``compile-fail``  calls a nonexistent ``tl.fancy_*`` -> rejected by gate 1 (static),
                    then the retry-fix reply (matched by that name, which the retry
                    request carries in the quoted first attempt and in the gate's error)
                    is a correct kernel -> accepted
* ``wrong``         drops one step of the math -> rejected by gate 2 (correctness); a
                    correctness failure is retried too (retries=1), and that reply
                    (matched by the wrong kernel's name) restores the step -> accepted
* ``slower``        correct but deliberately slow -> passes gates 1-2, must not win

Search parameters: iterations=1, plans=4, retries=1, beam=--beam (default 1: only the
best winner is re-timed, to save GPU time); so 6 candidates + 1 re-timing per problem.

Before any GPU work the same script is replayed through the real agent code
(prompt building, HTTP, parsing) against a second scripted server, so a reply
that would not parse or route stops the run at once (``--check-only`` does
only that; ``--cpu-check`` also runs every module through the gates on the
CPU under the Triton interpreter, on shrunken copies of the problems).
``tests/e2e/llm_rehearsal.py`` runs this whole script on the CPU
with a stand-in GPU worker (real gates 1-2 under the interpreter, doubles for the rest).

A device call lasts at most ten minutes and an LLM campaign about five on the one GPU
worker, so four problems take two calls on the same warm machine: the first with
``--keep-workers`` (server, workers and unfinished campaigns stay; the campaign ids and
the scripted server's port go to ``$KERNELOPT_HOME/gpu-llm-e2e.json``), the next with
``--resume`` (the scripted server comes back on the same port, campaigns already
submitted are awaited, the rest submitted; an LLM call that fell into the gap is
retried by Temporal).

Campaigns run one after another (``--parallel`` submits them together): the
GPU worker runs one activity at a time anyway, and in sequence the first
campaign finishes before the deadline even when the second cannot.  Written
to $OUT: outcomes, reports, per-candidate decision tables, the scripted
server's request log and rule use, workflow histories with activity
durations, worker logs.  When the deadline passes it records what finished
(and the gates that ran for what did not), stops the workers and exits 0.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import re
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernelopt.contracts import (
    CampaignOptions,
    CampaignProgress,
    Outcome,
    ProposerConfig,
    ProposerKind,
    SearchMode,
    SearchParams,
)
from kernelopt.contracts.compiled import SearchTarget, TargetKind
from kernelopt.contracts.screening import ScreenParams
from kernelopt.contracts.search import (
    SEARCH_PROGRESS,
    Decision,
    ExecuteInput,
    PlanInput,
    SearchKernelResult,
    SearchProgress,
    SummarizeInput,
)
from kernelopt.contracts.verdicts import GateName, GateStatus, GateVerdict
from tests.support.llm_replies import TAGS, has_reply, reply_source
from tests.support.paths import ROOT
from tests.support.scripted_openai import Reply, ScriptedOpenAI

DEFAULT_PROBLEMS = [
    ROOT / "problems" / "level1" / "009_softmax_rows.py",
    ROOT / "problems" / "level1" / "023_diag_matmul.py",
    ROOT / "problems" / "level1" / "011_layernorm.py",
    ROOT / "problems" / "level1" / "001_relu_chain.py",
]
MODEL = "scripted-model"
NO_KEY_ENV = "KERNELOPT_SCRIPTED_LLM_NO_KEY"  # deliberately unset: local servers take any key
TARGET_ID = "forward"  # single-kernel mode: the whole forward is the one search target
POST_S = 25.0  # seconds kept back from the deadline for collecting results and stopping
MIN_START_S = 90.0  # a later campaign started with less time left than this cannot finish
SUMMARIZER_MATCH = "Outcomes, one line per candidate"
FALLBACK_TEXT = "SCRIPT MISS: no scripted reply matches this request."

# shrunken sizes for the CPU check (the Triton interpreter runs one program at a time)
SMALL_SIZES = {
    "relu_chain": (64, 256),
    "softmax_rows": (16, 512),
    "layernorm": (2, 8, 256),
    "diag_matmul": (64, 96),
}
_SIZES_LINE = re.compile(r"^(?P<names>[A-Z]+(?:, [A-Z]+)+) = \d+(?:, \d+)+$", re.MULTILINE)


@dataclass(frozen=True)
class Scenario:
    """One scripted plan: its reply modules and what the gates must decide, per attempt."""

    key: str
    first: str  # reply of attempt 0: <tag>_<first> in tests/support/llm_replies.py
    retry: str | None  # reply module of attempt 1 (retry-fix), if the plan gets one
    expect: tuple[str, ...]  # per attempt: "accepted", "accepted-slower" or the deciding gate
    description: str


SCENARIOS = (
    Scenario(
        "good",
        "good",
        None,
        ("accepted",),
        "Fuse the whole forward into one Triton kernel that reads the input once "
        "(scripted GOOD: correct, should match or beat Inductor).",
    ),
    Scenario(
        "compile-fail",
        "compile_fail",
        "fixed",
        ("static", "accepted"),
        "The same fusion written against a triton.language helper that does not exist "
        "(scripted: fails to compile, the retry-fix reply repairs it).",
    ),
    Scenario(
        "wrong",
        "wrong",
        "wrong_fixed",
        ("correctness", "accepted"),
        "A fused kernel that drops one step of the math (scripted: wrong values for the "
        "correctness gate, the retry-fix reply restores the step).",
    ),
    Scenario(
        "slower",
        "slower",
        None,
        ("accepted-slower",),
        "A correct kernel with a deliberately poor launch shape: one single-warp program "
        "per row walking 32 columns at a time (scripted: must not beat the baseline).",
    ),
)
BY_KEY = {s.key: s for s in SCENARIOS}

# Gate 4's case needs a kernel that really is faster than the baseline's, so only problems
# where our kernel wins by a wide margin script it, in place of "slower".
DISPATCH = Scenario(
    "dispatch",
    "dispatch",
    None,
    ("performance",),
    "Keep the row-scale kernel but enumerate its tiles in Python on every call "
    "(scripted: faster per kernel, slower in the model -- gate 4 must reject it).",
)
PROBLEM_SCENARIOS = {"diag_matmul": {"slower": DISPATCH}}

# Text that only the retry-fix request of that plan carries: it quotes the first attempt
# back, and the gate's feedback about it.  ``check_script`` proves each occurs in its own
# first-attempt module and nowhere else (no other module, not the problem source).
RETRY_MARKERS = {
    ("relu_chain", "compile-fail"): "fancy_relu",
    ("relu_chain", "wrong"): "relu_chain_norelu_kernel",
    ("softmax_rows", "compile-fail"): "fancy_exp",
    ("softmax_rows", "wrong"): "softmax_unnormalised_kernel",
    ("layernorm", "compile-fail"): "fancy_rsqrt",
    ("layernorm", "wrong"): "layernorm_nobias_kernel",
    ("diag_matmul", "compile-fail"): "fancy_scale",
    ("diag_matmul", "wrong"): "diag_rowadd_kernel",
}


@dataclass
class ProblemScript:
    """A problem and its scripted replies."""

    path: Path
    tag: str
    source: str

    @classmethod
    def load(cls, path: Path) -> ProblemScript:
        tag = re.sub(r"^\d+_", "", path.stem)
        return cls(path=path.resolve(), tag=tag, source=path.read_text())

    def direction(self, scenario: Scenario) -> str:
        return f"{self.tag} {scenario.key}"

    @property
    def scenarios(self) -> tuple[Scenario, ...]:
        """The plans scripted for this problem, in order (see PROBLEM_SCENARIOS)."""
        swaps = PROBLEM_SCENARIOS.get(self.tag, {})
        return tuple(swaps.get(s.key, s) for s in SCENARIOS)

    def module(self, name: str) -> str:
        return reply_source(self.tag, name)

    def modules(self) -> dict[str, str]:
        names = [s.first for s in self.scenarios] + [s.retry for s in self.scenarios if s.retry]
        return {name: self.module(name) for name in names}

    @property
    def planner_match(self) -> str:
        """The problem file's first line: in the planner prompt (which quotes the source)."""
        return self.source.splitlines()[0]

    def scenario_of(self, direction: str) -> Scenario | None:
        return next((s for s in self.scenarios if self.direction(s) == direction), None)


# --- the script ----------------------------------------------------------------------------
def _kernel_reply(direction: str, module: str) -> str:
    return f"Scripted reply for plan `{direction}`.\n\n```python\n{module.rstrip()}\n```\n"


def build_rules(problems: list[ProblemScript]) -> tuple[list[Reply], dict[int, str]]:
    """The scripted replies, in matching order, and a name for each (by ``id``).

    The first unused rule whose text occurs in a request wins, and a later request of a
    conversation contains all its earlier text, so: the summarizer first (its request
    quotes every direction), then the retry-fix rules (a retry quotes the first attempt's
    plan), then the executor rules (by "Plan (<direction>)"), then the planners (by the
    problem's first line, which executor prompts quote too), and a catch-all last that
    answers something unusable, so a miss is a visible parse error, not an HTTP retry loop.
    """
    names: dict[int, str] = {}

    def rule(name: str, **kwargs: Any) -> Reply:
        reply = Reply(**kwargs)
        names[id(reply)] = name
        return reply

    rules = [rule("summarizer", match=SUMMARIZER_MATCH, content='{"entries": []}', repeat=True)]
    for p in problems:
        for s in p.scenarios:
            if s.retry:
                rules.append(
                    rule(
                        f"{p.tag}/{s.key}/a1",
                        match=RETRY_MARKERS[(p.tag, s.key)],
                        content=_kernel_reply(p.direction(s), p.module(s.retry)),
                        completion_tokens=600,
                    )
                )
    for p in problems:
        for s in p.scenarios:
            rules.append(
                rule(
                    f"{p.tag}/{s.key}/a0",
                    match=f"Plan ({p.direction(s)})",
                    content=_kernel_reply(p.direction(s), p.module(s.first)),
                    completion_tokens=600,
                )
            )
    for p in problems:
        plans = [{"direction": p.direction(s), "description": s.description} for s in p.scenarios]
        rules.append(
            rule(
                f"{p.tag}/plan",
                match=p.planner_match,
                content=json.dumps({"plans": plans}),
                completion_tokens=300,
            )
        )
    rules.append(rule("fallback", match="", content=FALLBACK_TEXT, repeat=True))
    return rules, names


def check_script(problems: list[ProblemScript]) -> list[str]:
    """Static checks: every reply module exists; each match text picks only its own request."""
    errors = []
    for p in problems:
        for s in p.scenarios:
            for name in (s.first, s.retry):
                if name and not has_reply(p.tag, name):
                    errors.append(f"{p.tag}: missing reply module {p.tag}_{name}")
        if not p.planner_match.strip():
            errors.append(f"{p.tag}: the problem file's first line is empty")
    if errors:
        return errors
    texts = {f"{q.tag}_{n}": m for q in problems for n, m in q.modules().items()}
    texts.update({f"problem {q.tag}": q.source for q in problems})
    for p in problems:
        for s in p.scenarios:
            if not s.retry:
                continue
            marker = RETRY_MARKERS.get((p.tag, s.key))
            if marker is None:
                errors.append(f"{p.tag}/{s.key}: no retry marker")
                continue
            holders = sorted(k for k, text in texts.items() if marker in text)
            if holders != [f"{p.tag}_{s.first}"]:
                errors.append(f"{p.tag}/{s.key}: marker {marker!r} occurs in {holders}")
        for q in problems:
            if q is not p and p.planner_match in q.source:
                errors.append(f"{p.tag}: its first line also opens {q.tag}")
    return errors


def proposer_config(base_url: str) -> ProposerConfig:
    return ProposerConfig(
        kind=ProposerKind.LLM,
        base_url=base_url,
        model=MODEL,
        api_key_env=NO_KEY_ENV,
        request_timeout_s=60.0,
    )


def describe(exc: BaseException) -> str:
    """An exception with its causes, innermost last (a missing module shows at the end)."""
    parts = []
    seen: BaseException | None = exc
    while seen is not None and len(parts) < 5:
        parts.append(f"{type(seen).__name__}: {seen}"[:300])
        seen = seen.__cause__ or seen.__context__
    return " <- ".join(parts)


def rule_name(names: dict[int, str], reply: Reply | None) -> str:
    return "(no rule: HTTP 500)" if reply is None else names.get(id(reply), "?")


# --- pre-flight: the real agent code against the script ----------------------------------------
def _synthetic_verdict(scenario: Scenario) -> GateVerdict:
    gate = GateName.STATIC if scenario.expect[0] == "static" else GateName.CORRECTNESS
    status = GateStatus.ERROR if gate == GateName.STATIC else GateStatus.FAIL
    return GateVerdict(
        gate=gate,
        status=status,
        reason="pre-flight stand-in verdict",
        feedback="(pre-flight: the real gate's feedback goes here)",
    )


async def preflight(
    problems: list[ProblemScript], verdicts: dict[tuple[str, str], GateVerdict] | None = None
) -> tuple[list[str], list[str]]:
    """Replay one search iteration per problem through ``kernelopt.agents.roles`` over HTTP.

    Returns (errors, notes).  ``verdicts``: real rejections to feed the retry-fix prompts
    (from the CPU gate check); without them a stand-in verdict is used (the retry rules
    match text of the first attempt, which the retry conversation quotes either way).
    """
    from kernelopt.agents import roles
    from kernelopt.agents.transport import ChatTransport
    from kernelopt.store import open_store

    for noisy in ("httpx", "httpx2"):  # one INFO line per request otherwise
        logging.getLogger(noisy).setLevel(logging.WARNING)
    errors = check_script(problems)
    notes: list[str] = []
    if errors:
        return errors, notes
    rules, names = build_rules(problems)
    with (
        tempfile.TemporaryDirectory(prefix="llm-e2e-preflight-") as tmp,
        ScriptedOpenAI(rules) as server,
    ):
        store = open_store(Path(tmp) / "artifacts")
        config = proposer_config(server.base_url)
        transport = ChatTransport(config)

        def expect_rule(what: str, wanted: str) -> None:
            got = rule_name(names, server.requests[-1].reply)
            if got != wanted:
                errors.append(f"{what}: request matched rule {got!r}, expected {wanted!r}")

        try:
            for p in problems:
                target = SearchTarget(
                    id=TARGET_ID,
                    kind=TargetKind.FORWARD,
                    kernels=["preflight_kernel"],
                    source=store.put_text(p.source, "text/x-python", p.path.name),
                )
                planned = await roles.plan(
                    PlanInput(
                        target=target,
                        state_source=target.source,
                        plans=len(SCENARIOS),
                        proposer=config,
                    ),
                    store,
                    transport,
                )
                expect_rule(f"{p.tag} planner", f"{p.tag}/plan")
                got = [plan.direction for plan in planned.plans]
                want = [p.direction(s) for s in p.scenarios]
                if planned.error or got != want:
                    errors.append(f"{p.tag} planner: {planned.error or got}")
                    continue
                for j, (plan, s) in enumerate(zip(planned.plans, p.scenarios, strict=True)):
                    inp = ExecuteInput(
                        target=target,
                        state_source=target.source,
                        plan=plan,
                        proposer=config,
                        candidate_id=f"preflight:{p.tag}-p{j}-a0",
                    )
                    first = await roles.execute(inp, store, transport)
                    expect_rule(f"{p.tag}/{s.key} executor", f"{p.tag}/{s.key}/a0")
                    _check_source(errors, f"{p.tag}/{s.key}/a0", first, p.module(s.first), store)
                    if not s.retry:
                        continue
                    verdict = (verdicts or {}).get((p.tag, s.key)) or _synthetic_verdict(s)
                    fix = inp.model_copy(
                        update={
                            "conversation": first.conversation,
                            "verdicts": [verdict],
                            "attempt": 1,
                            "candidate_id": f"preflight:{p.tag}-p{j}-a1",
                        }
                    )
                    second = await roles.retry_fix(fix, store, transport)
                    expect_rule(f"{p.tag}/{s.key} retry-fix", f"{p.tag}/{s.key}/a1")
                    _check_source(errors, f"{p.tag}/{s.key}/a1", second, p.module(s.retry), store)
                    told = str(server.requests[-1].messages[-1].get("content", ""))
                    gate = f"Gate `{verdict.gate.value}`"
                    if gate not in told:
                        errors.append(f"{p.tag}/{s.key}: the retry prompt lacks {gate!r}")
                    if verdicts:
                        notes.append(f"{p.tag}/{s.key} retry prompt: {gate_line(told)}")
            summary = await roles.summarize(
                SummarizeInput(
                    target=SearchTarget(id=TARGET_ID, kind=TargetKind.FORWARD),
                    outcomes=["- preflight: accepted, per-kernel speedup 1.000x"],
                    proposer=config,
                    use_llm=True,
                ),
                store,
                transport,
            )
            expect_rule("summarizer", "summarizer")
            if summary.error:
                errors.append(f"summarizer: {summary.error}")
        finally:
            await transport.close()
        unused = [rule_name(names, r) for r in server.unused()]
        if unused:
            errors.append(f"scripted replies never used: {unused}")
        misses = sum(1 for r in server.requests if rule_name(names, r.reply) == "fallback")
        if misses:
            errors.append(f"{misses} request(s) fell through to the catch-all")
        notes.append(f"pre-flight: {len(server.requests)} requests, every rule used as planned")
    return errors, notes


def gate_line(prompt: str) -> str:
    """The line of a retry-fix prompt that says which gate failed and why."""
    line = next((x for x in prompt.splitlines() if x.startswith("Gate `")), "(no gate line)")
    return line[:200]


def _check_source(errors: list[str], what: str, result: Any, module: str, store: Any) -> None:
    if result.error or result.source is None:
        errors.append(f"{what}: the executor parser rejected the reply: {result.error}")
    elif store.get_text(result.source) != module.strip() + "\n":
        errors.append(f"{what}: the parsed source differs from the reply module")


# --- CPU check: every module through gates 1-3 under the Triton interpreter -------------------
def small_copy(p: ProblemScript, directory: Path) -> Path:
    """The problem with shrunken sizes, under ``directory/<level dir>/`` (same file name)."""
    sizes = ", ".join(str(n) for n in SMALL_SIZES[p.tag])
    text, count = _SIZES_LINE.subn(lambda m: f"{m['names']} = {sizes}", p.source)
    if count != 1:
        raise SystemExit(f"{p.path}: no single 'NAME, NAME = <int>, <int>' line to shrink")
    out = directory / p.path.parent.name / p.path.name
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    return out


def _expectation_met(expect: str, accepted: bool, gate: str, timed: bool = True) -> bool:
    if expect.startswith("accepted") or (expect == "performance" and not timed):
        return accepted
    return not accepted and gate == expect


def cpu_gate_check(
    problems: list[ProblemScript], workdir: Path
) -> tuple[list[str], list[dict], dict[tuple[str, str], GateVerdict]]:
    """Gates 1-3 on the CPU (interpreter) for every reply module, on small problem copies."""
    from gates.cascade import verify_candidate
    from gates.reference import prepare_reference
    from kernelopt.contracts.verdicts import GateSettings

    settings = GateSettings(device="cpu", run_perf=False)
    errors: list[str] = []
    rows: list[dict] = []
    rejections: dict[tuple[str, str], GateVerdict] = {}
    for p in problems:
        if p.tag not in SMALL_SIZES:
            errors.append(f"{p.tag}: no small size for the CPU check")
            continue
        problem = small_copy(p, workdir / "problems")
        bundle = prepare_reference(str(problem), settings, workdir / f"reference-{p.tag}")
        if not bundle.ok:
            errors.append(f"{p.tag}: the reference did not run: {bundle.outcome.describe()}")
            continue
        for s in p.scenarios:
            attempts = [s.first] + ([s.retry] if s.retry else [])
            for attempt, name in enumerate(attempts):
                started = time.monotonic()
                candidate = workdir / f"{p.tag}_{name}.py"
                candidate.write_text(p.module(name))
                result = verify_candidate(
                    problem,
                    candidate,
                    settings,
                    workdir=workdir / f"verify-{p.tag}-{name}",
                    bundle=bundle,
                )
                gate = result.deciding_gate.value if result.deciding_gate else ""
                expect = s.expect[attempt]
                ok = _expectation_met(expect, result.accepted, gate, timed=settings.run_perf)
                failing = next((v for v in result.verdicts if not v.passed), None)
                if failing is not None and attempt == 0 and s.retry:
                    rejections[(p.tag, s.key)] = failing
                marker = RETRY_MARKERS.get((p.tag, s.key), "")
                row = {
                    "problem": p.tag,
                    "module": f"{p.tag}_{name}.py",
                    "attempt": attempt,
                    "expect": expect,
                    "accepted": result.accepted,
                    "deciding_gate": gate,
                    "gates": [f"{v.gate.value}:{v.status.value}" for v in result.verdicts],
                    "reason": result.reason[:160],
                    "feedback_quotes_marker": bool(
                        failing and marker and marker in failing.feedback
                    ),
                    "ok": ok,
                    "seconds": round(time.monotonic() - started, 1),
                }
                rows.append(row)
                print(
                    f"  {row['module']:32} {'ok' if ok else 'MISMATCH':8} expect {expect:16} "
                    f"{' '.join(row['gates'])}  ({row['seconds']} s)",
                    flush=True,
                )
                if not ok:
                    errors.append(f"{row['module']}: expected {expect}, got {row['gates']}")
    return errors, rows, rejections


# --- campaigns ----------------------------------------------------------------------------------
@dataclass
class Run:
    problem: ProblemScript
    handle: Any = None
    outcome: Outcome | None = None
    error: str = ""
    started_s: float | None = None
    finished_s: float | None = None
    search: SearchKernelResult | None = None
    rows: list[dict] = field(default_factory=list)
    partial: bool = False
    progress: str = ""


def campaign_options(settings: Any, base_url: str, beam: int) -> CampaignOptions:
    from kernelopt.campaigns import default_gpu_queue

    return CampaignOptions(
        mode=SearchMode.SINGLE,
        # every scenario's expected verdicts come from the cascade: no screening tier, which
        # would keep the deliberately slower plan out of it
        search=SearchParams(
            iterations=1,
            plans=len(SCENARIOS),
            beam=beam,
            retries=1,
            screen=ScreenParams(enabled=False),
        ),
        proposer=proposer_config(base_url),
        gpu_queue=default_gpu_queue(settings),
        cpu_queue=settings.cpu_queue,
        max_targets=1,
        gpu_heartbeat_s=15.0,  # a GPU worker killed by a concurrent fault test is noticed fast
    )


async def start_campaign_of(
    run: Run, client: Any, store: Any, options: CampaignOptions, t0: float
) -> None:
    from kernelopt.campaigns import prepare_problem, start_campaign

    problem = prepare_problem(run.problem.path, store, level=None)
    run.handle = await start_campaign(client, problem, options)
    run.started_s = time.monotonic() - t0
    print(f"[{run.started_s:6.0f} s] started {run.handle.id}", flush=True)


async def wait(run: Run, stop_at: float, t0: float) -> None:
    try:
        run.outcome = await asyncio.wait_for(
            run.handle.result(), timeout=max(1.0, stop_at - time.monotonic())
        )
    except TimeoutError:
        return
    except Exception as exc:  # a failed campaign is a row of the table, not the end of the run
        run.error = f"{type(exc).__name__}: {exc}"[:300]
    run.finished_s = time.monotonic() - t0
    what = run.outcome.category.value if run.outcome else run.error
    print(f"[{run.finished_s:6.0f} s] finished {run.handle.id}: {what}", flush=True)


def search_id(run: Run) -> str:
    return f"{run.handle.id}/search/{TARGET_ID}"


def expected(scenario: Scenario | None, attempt: int) -> str:
    if scenario is None or attempt >= len(scenario.expect):
        return ""
    return scenario.expect[attempt]


def judge(expect: str, accepted: bool, gate: str, speedup: float | None, best: bool) -> str:
    """The check column: "ok" when a decision is what the script meant (empty: no expectation)."""
    if not expect:
        return ""
    if not _expectation_met(expect, accepted, gate):
        return "MISMATCH"
    if expect == "accepted-slower" and (best or speedup is None or speedup >= 1.0):
        return "MISMATCH (not slower)"
    return "ok"


def decision_rows(p: ProblemScript, decisions: list[Decision], best_id: str | None) -> list[dict]:
    """One row per decision, with what the script expected of it."""
    rows = []
    for d in decisions:
        c = d.candidate
        direction = c.plan.direction if c.plan else ""
        expect = "" if d.retime else expected(p.scenario_of(direction), c.attempt)
        check = judge(expect, d.accepted, d.deciding_gate, d.speedup, c.id == best_id)
        rows.append(
            {
                "candidate": c.id + (" (retime)" if d.retime else ""),
                "direction": direction,
                "attempt": c.attempt,
                "accepted": d.accepted,
                "gate": d.deciding_gate or ("-" if d.accepted else "?"),
                "reason": " ".join(d.reason.split())[:110],
                "speedup": d.speedup,
                "kernel_ms": d.kernel_ms,
                "baseline_ms": d.baseline_kernel_ms,
                "best": c.id == best_id and not d.retime,
                "expect": expect,
                "check": check,
            }
        )
    return rows


async def partial_rows(client: Any, run: Run) -> list[dict]:
    """For a search the deadline cut short: the gate results its history already holds."""
    from temporalio.api.enums.v1 import EventType

    from kernelopt.contracts import names
    from kernelopt.contracts.verdicts import CandidateGateResult

    history = await client.get_workflow_handle(search_id(run)).fetch_history()
    gates = set()
    rows = []
    for e in history.events:
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            attrs = e.activity_task_scheduled_event_attributes
            if attrs.activity_type.name == names.GATE_CANDIDATE:
                gates.add(e.event_id)
        elif e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
            attrs = e.activity_task_completed_event_attributes
            if attrs.scheduled_event_id not in gates or not attrs.result.payloads:
                continue
            result = CandidateGateResult.model_validate_json(attrs.result.payloads[0].data)
            failing = next((v for v in result.verdicts if not v.passed), None)
            base, cand = result.baseline_kernel_ms, result.kernel_ms
            plan = re.search(r"-p(\d+)-a(\d+)(:retime)?$", result.candidate_id)
            scenario = run.problem.scenarios[int(plan.group(1))] if plan else None
            attempt = int(plan.group(2)) if plan else 0
            speedup = base / cand if base and cand else None
            gate = failing.gate.value if failing else ""
            expect = "" if not plan or plan.group(3) else expected(scenario, attempt)
            rows.append(
                {
                    "candidate": result.candidate_id,
                    "direction": run.problem.direction(scenario) if scenario else "",
                    "attempt": attempt,
                    "accepted": result.passed,
                    "gate": gate or "-",
                    "reason": (f"{failing.status.value}: {failing.reason}" if failing else "")[
                        :110
                    ],
                    "speedup": speedup,
                    "kernel_ms": cand,
                    "baseline_ms": base,
                    "best": False,
                    "expect": expect,
                    "check": judge(expect, result.passed, gate, speedup, False),
                }
            )
    return rows


async def collect(run: Run, client: Any, store: Any, out: Path) -> None:
    """Outcome, report and decision table; for an unfinished campaign its progress and the
    decisions so far (the search's, if it already ended; else the gate results in its history).
    """
    if run.handle is None:
        return
    name = run.handle.id
    finished = run.outcome is not None
    if run.outcome is not None:
        (out / f"{name}.outcome.json").write_text(run.outcome.model_dump_json(indent=2))
        if run.outcome.report is not None:
            (out / f"{name}.report.md").write_text(store.get_text(run.outcome.report))
    try:
        child = client.get_workflow_handle(search_id(run), result_type=SearchKernelResult)
        run.search = await asyncio.wait_for(child.result(), timeout=30 if finished else 3)
    except Exception as exc:  # no search (yet), or it failed: the outcome / progress says why
        run.progress = f"no search result ({type(exc).__name__})"
    if run.search is not None:
        (out / f"{name}.search.json").write_text(run.search.model_dump_json(indent=2))
        best = run.search.best.id if run.search.best else None
        run.rows = decision_rows(run.problem, run.search.decisions, best)
    if finished:
        return
    try:
        progress = await asyncio.wait_for(
            run.handle.query("progress", result_type=CampaignProgress), timeout=15
        )
        run.progress = f"phase {progress.phase.value}; {progress.message}".strip("; ")
        if run.search is None:
            step = await asyncio.wait_for(
                client.get_workflow_handle(search_id(run)).query(
                    SEARCH_PROGRESS, result_type=SearchProgress
                ),
                timeout=15,
            )
            run.progress += f"; search: {step.step} ({step.candidates_tried} tried)"
    except Exception as exc:  # the search may not have started: say so and go on
        run.progress += f" ({type(exc).__name__} while asking for progress)"
    if run.search is None:
        try:
            run.rows = await partial_rows(client, run)
            run.partial = True
        except Exception as exc:  # no search history yet
            run.progress += f"; no gate results ({type(exc).__name__})"


def table_text(run: Run) -> str:
    """Decisions in plan / attempt order, re-timings last; ``*`` marks the search's best."""
    head = (
        f"{'candidate':29} {'direction':25} {'acc':3} {'gate':11} {'speedup':8} "
        f"{'expected':15} {'check':8} reason"
    )
    lines = [head, "-" * len(head)]
    for r in sorted(run.rows, key=lambda r: ("retime" in r["candidate"], r["candidate"])):
        speed = f"{r['speedup']:.3f}x" if r["speedup"] else "-"
        star = "*" if r["best"] else " "
        lines.append(
            f"{r['candidate']:29} {r['direction']:25} {('yes' if r['accepted'] else 'no'):3} "
            f"{r['gate']:11} {speed:>7}{star} {r['expect']:15} {r['check'][:8]:8} {r['reason']}"
        )
    return "\n".join(lines)


def outcome_line(run: Run) -> str:
    if run.handle is None:
        return f"{run.problem.tag}: not started ({run.error or 'deadline'})"
    o = run.outcome
    if o is None:
        state = run.error or f"unfinished: {run.progress}"
        return f"{run.handle.id}: {state}"
    checks = [r["check"] for r in run.rows if r["check"]]
    met = sum(1 for c in checks if c == "ok")
    best = run.search.best if run.search else None
    best_text = (
        f"best {best.id} ({best.plan.direction if best.plan else ''}) "
        f"{run.search.best_kernel_speedup:.3f}x"
        if best and run.search and run.search.best_kernel_speedup
        else "no candidate beat the baseline"
    )
    return (
        f"{run.handle.id}: {o.category.value} {o.speedup:.3f}x "
        f"(baseline {o.baseline_ms or 0:.4f} ms, optimized {o.optimized_ms or 0:.4f} ms); "
        f"{o.candidates_tried} tried / {o.candidates_accepted} passed gates 1-2; {best_text}; "
        f"expectations met {met}/{len(checks)}; {o.reason[:100]}"
    )


def llm_report(server: ScriptedOpenAI, names: dict[int, str], out: Path) -> dict:
    """What the scripted server saw: requests per rule, unused rules, the retry prompts."""
    per_rule: dict[str, int] = {}
    log = []
    retries = []
    for i, req in enumerate(server.requests):
        name = rule_name(names, req.reply)
        per_rule[name] = per_rule.get(name, 0) + 1
        last = str(req.messages[-1].get("content", "")) if req.messages else ""
        log.append({"i": i, "rule": name, "messages": len(req.messages), "last": last[:300]})
        if name.endswith("/a1"):
            tag, key = name.split("/")[:2]
            gate = "static" if BY_KEY[key].expect[0] == "static" else "correctness"
            retries.append(
                {
                    "rule": name,
                    "names_gate": f"Gate `{gate}`" in last,
                    "gate_line": gate_line(last),
                    "marker": RETRY_MARKERS[(tag, key)],
                    "feedback_quotes_marker": RETRY_MARKERS[(tag, key)] in last,
                    "prompt_head": last[:800],
                }
            )
    with (out / "llm_requests.jsonl").open("w") as handle:
        for row in log:
            handle.write(json.dumps(row) + "\n")
    report = {
        "requests": len(server.requests),
        "per_rule": per_rule,
        "unused": [rule_name(names, r) for r in server.unused()],
        "fallback_hits": per_rule.get("fallback", 0),
        "no_rule_500s": per_rule.get("(no rule: HTTP 500)", 0),
        "retry_prompts": retries,
    }
    (out / "llm.json").write_text(json.dumps(report, indent=2))
    return report


async def run_campaigns(args: argparse.Namespace, problems: list[ProblemScript], out: Path) -> None:
    from kernelopt.bench.costs import dump_histories  # the same dump and activity table
    from kernelopt.client import connect
    from kernelopt.config import Settings
    from kernelopt.local_workers import ensure_local_workers, stop_local_workers
    from kernelopt.store import open_store

    t0 = args.t0
    stop_at = t0 + args.deadline - POST_S
    # the CPU worker calls the scripted server on 127.0.0.1: never through a proxy
    os.environ["NO_PROXY"] = ",".join(
        filter(None, [os.environ.get("NO_PROXY", ""), "127.0.0.1", "localhost"])
    )
    os.environ["no_proxy"] = os.environ["NO_PROXY"]
    os.environ.pop(NO_KEY_ENV, None)
    settings = Settings.from_env()
    state_file = settings.home / "gpu-llm-e2e.json"
    state: dict[str, Any] = {"port": 0, "campaigns": {}}
    if args.resume and state_file.is_file():
        state = json.loads(state_file.read_text())
        print(f"resuming: {state}", flush=True)
    rules, names = build_rules(problems)
    server = ScriptedOpenAI(rules, port=state["port"]).start()
    state["port"] = int(server.base_url.rsplit(":", 1)[1].split("/")[0])
    runs = [Run(problem=p) for p in problems]
    try:
        client = await connect(settings)
        workers = ensure_local_workers(settings)
        print(
            f"[{time.monotonic() - t0:6.0f} s] server up, workers {workers}, LLM {server.base_url}",
            flush=True,
        )
        store = open_store(settings.artifacts_dir)
        options = campaign_options(settings, server.base_url, args.beam)
        (out / "options.json").write_text(options.model_dump_json(indent=2))
        settings.home.mkdir(parents=True, exist_ok=True)
        for run in runs:  # submitted by an earlier call (--resume): await, do not resubmit
            known = state["campaigns"].get(run.problem.tag)
            if known:
                run.handle = client.get_workflow_handle(known, result_type=Outcome)
                run.started_s = 0.0

        async def start(run: Run) -> None:
            if run.handle is None:
                await start_campaign_of(run, client, store, options, t0)
                state["campaigns"][run.problem.tag] = run.handle.id
                state_file.write_text(json.dumps(state, indent=2))

        if args.parallel:
            for run in runs:
                await start(run)
            await asyncio.gather(*(wait(run, stop_at, t0) for run in runs))
        else:
            for run in runs:
                if (
                    run.handle is None
                    and run is not runs[0]
                    and stop_at - time.monotonic() < MIN_START_S
                ):
                    run.error = "not started: too little time left before the deadline"
                    continue
                await start(run)
                await wait(run, stop_at, t0)
        if time.monotonic() >= stop_at:
            print(
                f"[{time.monotonic() - t0:6.0f} s] deadline: collecting what finished", flush=True
            )
        for run in runs:
            try:
                await collect(run, client, store, out)
            except Exception as exc:  # keep the others
                run.progress += f"; collecting failed: {type(exc).__name__}: {exc}"[:200]
        for run in runs:
            if args.keep_workers:
                break  # unfinished campaigns go on; the next call resumes them
            if run.handle is not None and run.outcome is None and not run.error:
                # or the workers of a later run on this machine would pick its work up again
                try:
                    await run.handle.terminate(reason="llm_campaign deadline")
                except Exception as exc:  # it may have just finished
                    print(f"could not terminate {run.handle.id}: {describe(exc)}")
        llm = llm_report(server, names, out)
        try:
            await dump_histories(client, [r.handle.id for r in runs if r.handle is not None], out)
        except Exception as exc:  # histories are extras: the summary still gets printed
            print(f"could not dump histories: {describe(exc)}")
        for name in ("cpu", "gpu0"):
            log = settings.home / "workers" / f"{name}.log"
            if log.is_file():
                shutil.copy(log, out / f"worker-{name}.log")
        summary = print_summary(runs, llm, t0, resumed=bool(args.resume))
        (out / "summary.txt").write_text(summary)
        (out / "decisions.json").write_text(
            json.dumps({r.handle.id: r.rows for r in runs if r.handle is not None}, indent=2)
        )
    finally:
        server.stop()
        keep = args.keep_workers or os.environ.get("KERNELOPT_E2E_KEEP_WORKERS") == "1"
        if not keep:  # another script (or the next --resume call) shares them
            stop_local_workers(settings, wait_s=5)
        print(f"done; wall {time.monotonic() - t0:.0f} s", flush=True)


def print_summary(runs: list[Run], llm: dict, t0: float, resumed: bool = False) -> str:
    parts = []
    for run in runs:
        title = run.handle.id if run.handle is not None else run.problem.tag
        partial = " (deadline: gate results so far)" if run.partial else ""
        if run.rows:
            parts.append(f"\n== {title}{partial}\n{table_text(run)}")
        else:
            parts.append(f"\n== {title}: no decisions or gate results to show")
    parts.append("\n== outcomes")
    parts.extend(outcome_line(run) for run in runs)
    parts.append(
        f"\n== scripted LLM: {llm['requests']} requests; unused replies: "
        f"{llm['unused'] or 'none'}; catch-all hits: {llm['fallback_hits']}; "
        f"unmatched (HTTP 500): {llm['no_rule_500s']}"
        + (" (this call's server only: an earlier call served the rest)" if resumed else "")
    )
    parts.append(
        "   per rule: " + ", ".join(f"{k}={v}" for k, v in sorted(llm["per_rule"].items()))
    )
    for r in llm["retry_prompts"]:
        parts.append(
            f"   retry prompt {r['rule']} (names the failing gate: {r['names_gate']}): "
            f"{r['gate_line'][:150]}"
        )
    parts.append(f"wall {time.monotonic() - t0:.0f} s")
    text = "\n".join(parts) + "\n"
    print(text, flush=True)
    return text


# --- main -----------------------------------------------------------------------------------------
def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--deadline", type=float, default=480.0, help="seconds for the whole run")
    parser.add_argument("--problems", nargs="+", type=Path, default=DEFAULT_PROBLEMS)
    parser.add_argument("--beam", type=int, default=1, help="winners re-timed (beam width)")
    parser.add_argument("--parallel", action="store_true", help="submit all campaigns at once")
    parser.add_argument("--check-only", action="store_true", help="pre-flight only, no campaigns")
    parser.add_argument(
        "--keep-workers",
        action="store_true",
        help="leave server, workers and unfinished campaigns running (a --resume call follows)",
    )
    parser.add_argument(
        "--resume",
        action="store_true",
        help="await the campaigns an earlier --keep-workers call submitted; submit the rest",
    )
    parser.add_argument(
        "--cpu-check",
        action="store_true",
        help="pre-flight + every reply module through gates 1-3 on the CPU (interpreter)",
    )
    args = parser.parse_args()
    args.t0 = time.monotonic()
    out = Path(os.environ.get("OUT", "/tmp/gpu-llm-e2e-out"))
    out.mkdir(parents=True, exist_ok=True)
    problems = [ProblemScript.load(path) for path in args.problems]
    unknown = [p.tag for p in problems if p.tag not in TAGS]
    if unknown:
        print(f"no scripted replies for {unknown}; scripted problems: {list(TAGS)}")
        return 2

    verdicts = None
    if args.cpu_check:
        os.environ.setdefault("KERNELOPT_HOME", tempfile.mkdtemp(prefix="llm-e2e-home-"))
        print("gates 1-3 on the CPU (Triton interpreter, small problem copies):", flush=True)
        with tempfile.TemporaryDirectory(prefix="llm-e2e-cpu-") as tmp:
            errors, rows, verdicts = cpu_gate_check(problems, Path(tmp))
        (out / "cpu_gates.json").write_text(json.dumps(rows, indent=2))
        if errors:
            print("CPU gate check FAILED:\n  " + "\n  ".join(errors))
            return 1
    try:
        errors, notes = asyncio.run(preflight(problems, verdicts))
    except Exception as exc:  # e.g. a module the HTTP client needs is missing on this host
        errors, notes = [f"pre-flight raised {describe(exc)}"], []
    (out / "preflight.json").write_text(json.dumps({"errors": errors, "notes": notes}, indent=2))
    for line in notes:
        print(f"  {line}")
    if errors:
        print("pre-flight FAILED (nothing was started):\n  " + "\n  ".join(errors))
        return 1
    print(f"pre-flight ok ({time.monotonic() - args.t0:.1f} s)", flush=True)
    if args.check_only or args.cpu_check:
        return 0
    asyncio.run(run_campaigns(args, problems, out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
