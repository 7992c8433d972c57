"""Connecting to Temporal: the embedded dev server or a production cluster.

One function builds every client (CLI, workers, tests' helpers) so the
pydantic data converter, TLS and API-key settings are never forgotten.
"""

from __future__ import annotations

import asyncio

from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.service import RPCError, TLSConfig

from kernelopt.config import Settings
from kernelopt.errors import InfrastructureError, KernelOptError
from kernelopt.temporal_server import EmbeddedServer, ensure_server


class ServerStopped(KernelOptError):
    """A command that only reads or steers campaigns found the embedded server stopped."""


def _tls(settings: Settings) -> TLSConfig | bool | None:
    """mTLS when files are given; otherwise the flag, or the SDK's default (TLS with an API key)."""
    if settings.tls_cert or settings.tls_key or settings.tls_ca:
        return TLSConfig(
            server_root_ca_cert=settings.tls_ca.read_bytes() if settings.tls_ca else None,
            client_cert=settings.tls_cert.read_bytes() if settings.tls_cert else None,
            client_private_key=settings.tls_key.read_bytes() if settings.tls_key else None,
        )
    if settings.tls is None:
        return None
    return bool(settings.tls)


async def connect(settings: Settings, *, start_embedded: bool = True, retries: int = 3) -> Client:
    """A client with our data converter; starts the embedded server when none is configured."""
    if start_embedded and settings.embedded:
        await asyncio.to_thread(ensure_server, settings)
    api_key = settings.api_key.get_secret_value() if settings.api_key else None
    last: Exception | None = None
    for attempt in range(retries):
        try:
            return await Client.connect(
                settings.address,
                namespace=settings.namespace,
                data_converter=pydantic_data_converter,
                tls=_tls(settings),
                api_key=api_key,
            )
        except (RPCError, RuntimeError, OSError) as exc:
            last = exc
            await asyncio.sleep(0.5 * (attempt + 1))
    where = "the embedded server" if settings.embedded else settings.address
    raise InfrastructureError(f"cannot reach Temporal at {where}: {last}")


async def connect_running(settings: Settings) -> Client:
    """A client for read-only and steering commands: never starts the embedded server.

    ``kernelopt server stop`` must mean stopped; a ``list`` or ``show`` afterwards says
    so instead of silently bringing the server (and its campaigns) back.
    """
    if settings.embedded:
        status = await asyncio.to_thread(EmbeddedServer(settings).status)
        if not status.running:
            raise ServerStopped(
                f"the Temporal dev server is stopped (state {status.db_path}): "
                "`kernelopt server start` starts it (`kernelopt optimize` does too)"
            )
    return await connect(settings, start_embedded=False)
