"""Publish a loopback port on another address: ``python -m tests.deploy.tcp_forward IP PORT TARGET``.

The dev server binds its internal services to the same address as its frontend
and dials them on 127.0.0.1, so it only works on loopback.  Worker "hosts" in
network namespaces reach it through this byte-for-byte TCP relay on the bridge
address -- what Docker's port publishing does for the compose frontend.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        with contextlib.suppress(Exception):
            writer.close()


async def main(ip: str, port: int, target: int) -> None:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", target)
        except OSError:
            writer.close()
            return
        await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))

    server = await asyncio.start_server(handle, ip, port)
    sys.stdout.write(f"forwarding {ip}:{port} -> 127.0.0.1:{target}\n")
    sys.stdout.flush()
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3])))
