"""What a chat exchange is, apart from the client that carries it.

Kept out of ``transport`` so that code which only writes or reads requests (the reply
folder, the CLI) does not import the ``openai`` client, about half a second per command.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from kernelopt.contracts.search import Usage

Message = dict[str, str]  # {"role": ..., "content": ...}


class ChatReply(BaseModel):
    model_config = ConfigDict(frozen=True)

    text: str
    usage: Usage
    model: str = ""
    finish_reason: str = ""
