"""`--intercept`: an HTTP(S) proxy (CONNECT) on loopback for clients whose URL is hard-coded to the real service.
A tunnel to a realtime host (`is_realtime_host`: api.openai.com, Azure's) is answered here with a certificate for
that host signed by rtrace's authority (`rtrace.net.link.tls.for_host`), and its websocket goes to the local endpoint
(the fake, or the link to an upstream); a tunnel to any other host is a byte pipe to it, untouched. The command is
told the proxy and the authority (`Interceptor.env`). Makes no decision about events: it only moves bytes.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

from .tls import TlsFiles, for_host, trust_bundle

#: Hosts whose realtime websocket `--intercept` answers (exactly), and the suffixes of those it answers by name.
REALTIME_HOSTS = frozenset({"api.openai.com"})
REALTIME_SUFFIXES = (".openai.azure.com", ".cognitiveservices.azure.com", ".services.ai.azure.com")
#: The longest request head a client may send before its tunnel (bytes), and how long it may take.
HEAD_BYTES = 16384
HEAD_SECONDS = 10.0
Opener = Callable[[str, int], Awaitable[tuple[asyncio.StreamReader, asyncio.StreamWriter]]]


def is_realtime_host(host: str) -> bool:
    """Whether `host` (a DNS name: letters, digits, dots and hyphens) is one `--intercept` answers."""
    host = host.lower().rstrip(".")
    if not host or any(not (c.isascii() and (c.isalnum() or c in ".-")) for c in host):
        return False
    return host in REALTIME_HOSTS or host.endswith(REALTIME_SUFFIXES)


def split_target(target: str) -> tuple[str, int] | None:
    """`host:port` of a CONNECT (`[::1]:443` too) -> (host, port); None when it is not one."""
    host, sep, port = target.rpartition(":")
    if not sep or not port.isdigit() or not host or not 0 < int(port) < 65536:
        return None
    return host.strip("[]"), int(port)


@dataclasses.dataclass
class InterceptOptions:
    """Where the realtime hosts' websockets go (a `ws://` endpoint on this machine), and where the proxy listens."""

    target_port: int
    target_host: str = "127.0.0.1"
    host: str = "127.0.0.1"
    port: int = 0
    #: The folder of rtrace's authority (`tls.tls_dir()` when None).
    folder: Path | None = None
    #: How a tunnel to another host is opened (tests give one that refuses: nothing leaves the machine).
    opener: Opener = asyncio.open_connection


class Interceptor:
    """A running `--intercept` proxy: `url` is what `https_proxy` is set to."""

    def __init__(self, options: InterceptOptions) -> None:
        self.options = options
        self.port = 0
        self._server: asyncio.Server | None = None
        #: The TLS end of each realtime host: a loopback server with its certificate, by host.
        self._ends: dict[str, tuple[asyncio.Server, int]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self.ca: TlsFiles | None = None
        #: Each tunnel asked for, in order: (host, port, whether it was answered here).
        self.tunnels: list[tuple[str, int, bool]] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def env(self) -> dict[str, str]:
        """What the command is given: the proxy, both spellings, and the authorities (rtrace's with the system's
        for the variables that replace them, rtrace's alone for Node's, which adds)."""
        assert self.ca is not None
        bundle = str(trust_bundle(self.ca))
        return {"https_proxy": self.url, "HTTPS_PROXY": self.url, "SSL_CERT_FILE": bundle,
                "REQUESTS_CA_BUNDLE": bundle, "NODE_EXTRA_CA_CERTS": str(self.ca.ca)}  # fmt: skip

    async def start(self) -> None:
        self.ca = for_host("api.openai.com", self.options.folder)  # the authority made now, not at the first tunnel
        self._server = await asyncio.start_server(self._client, self.options.host, self.options.port)
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        servers = [s for s, _ in self._ends.values()] + ([self._server] if self._server else [])
        for server in servers:
            server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for server in servers:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(server.wait_closed(), 1.0)

    async def _end_of(self, host: str) -> int:
        """The loopback port of `host`'s TLS end (made at its first tunnel)."""
        if host not in self._ends:
            files = await asyncio.to_thread(for_host, host, self.options.folder)
            server = await asyncio.start_server(self._terminated, "127.0.0.1", 0, ssl=files.context())
            self._ends[host] = (server, server.sockets[0].getsockname()[1])
        return self._ends[host][1]

    async def _terminated(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """A realtime host's tunnel, decrypted: to the local endpoint."""
        try:
            up_reader, up_writer = await asyncio.open_connection(self.options.target_host, self.options.target_port)
        except OSError:
            writer.close()
            return
        await _splice(reader, writer, up_reader, up_writer)

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        try:
            await self._tunnel(reader, writer)
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, asyncio.TimeoutError):
            writer.close()
        finally:
            if task is not None:
                self._tasks.discard(task)

    async def _tunnel(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), HEAD_SECONDS)
        if len(head) > HEAD_BYTES:
            return _answer(writer, 431, "Request Header Fields Too Large")
        method, _, rest = head.split(b"\r\n", 1)[0].decode("latin-1").partition(" ")
        target = split_target(rest.partition(" ")[0])
        if method.upper() != "CONNECT" or target is None:
            return _answer(writer, 405, "Method Not Allowed (rtrace --intercept tunnels CONNECT only)")
        host, port = target
        ours = is_realtime_host(host)
        self.tunnels.append((host, port, ours))
        try:
            if ours:
                up_reader, up_writer = await asyncio.open_connection("127.0.0.1", await self._end_of(host))
            else:
                up_reader, up_writer = await self.options.opener(host, port)
        except OSError as e:
            return _answer(writer, 502, f"Bad Gateway ({e.strerror or e})")
        writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
        await writer.drain()
        await _splice(reader, writer, up_reader, up_writer)


def _answer(writer: asyncio.StreamWriter, status: int, phrase: str) -> None:
    writer.write(f"HTTP/1.1 {status} {phrase}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".encode("latin-1"))
    writer.close()


async def _splice(
    a_reader: asyncio.StreamReader,
    a_writer: asyncio.StreamWriter,
    b_reader: asyncio.StreamReader,
    b_writer: asyncio.StreamWriter,
) -> None:
    """Bytes both ways until either side ends; then both are closed."""

    async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError, ConnectionError):
            while data := await reader.read(1 << 16):
                writer.write(data)
                await writer.drain()

    ends = [asyncio.create_task(pipe(a_reader, b_writer)), asyncio.create_task(pipe(b_reader, a_writer))]
    try:
        await asyncio.wait(ends, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in ends:
            task.cancel()
        await asyncio.gather(*ends, return_exceptions=True)
        for writer in (a_writer, b_writer):
            writer.close()


@contextlib.asynccontextmanager
async def run_intercept(options: InterceptOptions) -> AsyncIterator[Interceptor]:
    """An `Interceptor` for the duration of the block."""
    proxy = Interceptor(options)
    try:
        await proxy.start()
        yield proxy
    finally:
        await proxy.stop()


@contextlib.asynccontextmanager
async def intercepting(enabled: bool, target_port: int) -> AsyncIterator[dict[str, str]]:
    """The environment a hunt's command gets for `--intercept` (an `Interceptor` to `target_port` while the block
    runs), or nothing when not `enabled`."""
    if not enabled:
        yield {}
        return
    async with run_intercept(InterceptOptions(target_port)) as proxy:
        yield proxy.env()


__all__ = ["REALTIME_HOSTS", "InterceptOptions", "Interceptor", "intercepting", "is_realtime_host", "run_intercept"]
