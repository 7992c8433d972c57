"""The rewrite family: every rule that changes the traced graph gives one ModelNew candidate."""

from __future__ import annotations

from kernelopt.contracts.search import BuiltinProposeInput, BuiltinVariant
from kernelopt.log import get_logger
from kernelopt.proposer.rewrites import RULES
from kernelopt.proposer.rewrites.graph import RewriteError, model_new_source, trace
from kernelopt.proposer.targets import not_whole_forward
from kernelopt.store import ArtifactStore

log = get_logger(__name__)
ALL = "rewrite:all"


def rewrite_sources(source: str, seed: int = 0) -> dict[str, tuple[str, list[str]]]:
    """``{label: (ModelNew source, what changed)}``: each rule alone, and all together."""
    out: dict[str, tuple[str, list[str]]] = {}
    combined: list[str] = []
    for name, rule in RULES.items():
        gm, _ = trace(source, seed)
        try:
            done = rule(gm)
        except Exception as exc:  # a rule that trips on an unforeseen graph: the others go on
            log.warning("rewrite rule failed", rule=name, error=f"{type(exc).__name__}: {exc}")
            continue
        if done:
            out[f"rewrite:{name}"] = (model_new_source(source, gm, done), done)
            combined.append(name)
    if len(combined) > 1:
        gm, _ = trace(source, seed)
        done = [d for name in combined for d in RULES[name](gm)]
        out[ALL] = (model_new_source(source, gm, done), done)
    return out


def propose_rewrites(
    inp: BuiltinProposeInput, store: ArtifactStore, count: int, exclude: set[str]
) -> tuple[list[BuiltinVariant], str]:
    """Rewrite candidates for a whole-forward target of a module problem."""
    if count <= 0:
        return [], ""
    refused = not_whole_forward(inp, "algebraic rewrites apply")
    if refused:
        return [], refused
    source = store.get_text(inp.compiled.problem.source)
    try:
        found = rewrite_sources(source, inp.compiled.problem.seed)
    except RewriteError as exc:
        log.info("no rewrite", reason=str(exc))
        return [], f"no algebraic rewrite: {exc}"
    except Exception as exc:  # the user's module ran here: anything it raises is a note
        why = f"{type(exc).__name__}: {exc}".splitlines()[0][:200]
        log.info("no rewrite", reason=why)
        return [], f"no algebraic rewrite: the problem could not be traced ({why})"
    variants = []
    for tag, (text, done) in found.items():
        if tag in exclude or len(variants) >= count:
            continue
        ref = store.put_text(text, "text/x-python", f"{tag.replace(':', '_')}.py")
        variants.append(
            BuiltinVariant(
                label=tag, source=ref, description="algebraic rewrite: " + "; ".join(done)
            )
        )
    return variants, "" if variants else "no algebraic rewrite applies"
