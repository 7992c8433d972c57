"""A scripted LLM that never runs dry: distinct plans and distinct kernels on every request.

For long synthetic campaigns (and the recorded LLM history): the planner gets
exactly as many plans as it asks for, each with a direction derived from the
request (so the meltdown detector never collapses them); the executor and
retry-fix get a small Triton module salted with a hash of the request (so
every candidate is new source); the summarizer gets an empty list.  Every
reply bills fixed token counts, so a test can recompute the campaign's token
budget from the requests the server saw.
"""

from __future__ import annotations

import hashlib
import json
import re

from kernelopt.contracts import ProposerConfig, ProposerKind
from tests.support.scripted_openai import Reply, ScriptedOpenAI

PROMPT_TOKENS = 100
COMPLETION_TOKENS = 50
USD_PER_MTOK_IN = 2.0
USD_PER_MTOK_OUT = 8.0


def _digest(messages: list[dict]) -> str:
    text = "\n".join(str(m.get("content", "")) for m in messages)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def plans(messages: list[dict]) -> str:
    wanted = re.search(r"Propose up to (\d+) plans", str(messages[-1].get("content", "")))
    n = int(wanted.group(1)) if wanted else 1
    salt = _digest(messages)
    return json.dumps(
        {
            "plans": [
                {"direction": f"idea {salt[:8]} {j}", "description": f"variant {j} of {salt}"}
                for j in range(n)
            ]
        }
    )


def kernel(messages: list[dict]) -> str:
    salt = _digest(messages)
    return (
        "```python\nimport triton\nimport triton.language as tl\n\n"
        f"# scripted candidate {salt}\n"
        "@triton.jit\n"
        "def scripted_kernel(x_ptr, n, BLOCK: tl.constexpr):\n"
        "    pass\n\n\n"
        "def launch(*args):\n"
        "    return None\n```"
    )


def endless_script() -> list[Reply]:
    usage = {"prompt_tokens": PROMPT_TOKENS, "completion_tokens": COMPLETION_TOKENS}
    return [
        Reply(match="Propose up to", respond=plans, repeat=True, **usage),
        Reply(
            match="Outcomes, one line per candidate",
            content='{"entries": []}',
            repeat=True,
            **usage,
        ),
        Reply(match="", respond=kernel, repeat=True, **usage),  # executor and retry-fix
    ]


def scripted_llm() -> ScriptedOpenAI:
    return ScriptedOpenAI(endless_script())


def proposer(server: ScriptedOpenAI) -> ProposerConfig:
    return ProposerConfig(
        kind=ProposerKind.LLM,
        base_url=server.base_url,
        model="scripted-model",
        api_key_env="KERNELOPT_TEST_NO_KEY",
        usd_per_mtok_in=USD_PER_MTOK_IN,
        usd_per_mtok_out=USD_PER_MTOK_OUT,
    )
