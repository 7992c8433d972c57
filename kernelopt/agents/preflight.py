"""Is the LLM endpoint there at all?  Asked once, before a campaign is submitted.

Without this, a typo in ``--llm-base-url`` surfaces hours later as retried
activities in the middle of a search.  One ``GET /models`` with a short
timeout separates "nothing listens" and "the key is refused" (clear, one-line
errors now) from everything else: a server that answers at all -- even 404,
since some OpenAI-compatible servers have no model list -- is reachable.
"""

from __future__ import annotations

import openai

from kernelopt.agents.transport import endpoint_label, make_client
from kernelopt.contracts.search import ProposerConfig

PREFLIGHT_TIMEOUT_S = 10.0


async def llm_endpoint_problem(config: ProposerConfig) -> str | None:
    """None when the endpoint answers; else why a campaign could not use it."""
    where = endpoint_label(config)
    client = make_client(config).with_options(timeout=PREFLIGHT_TIMEOUT_S, max_retries=0)
    try:
        await client.models.list()
    except openai.AuthenticationError as exc:
        return f"{where} refused the API key (HTTP {exc.status_code}); check ${config.api_key_env}"
    except openai.PermissionDeniedError as exc:
        return f"{where} refused access (HTTP {exc.status_code}): {exc.message[:200]}"
    except openai.APITimeoutError:
        return f"{where} did not answer within {PREFLIGHT_TIMEOUT_S:g} s"
    except openai.APIConnectionError as exc:
        cause = exc.__cause__ or exc
        return f"cannot reach {where}: {type(cause).__name__}: {str(cause)[:200]}"
    except openai.APIStatusError:
        return None  # it answered: some servers have no model list
    finally:
        await client.close()
    return None
