"""`rtrace record`: a recording websocket proxy between a realtime client and its endpoint.

Owns the proxy: one upstream connection per client connection, frames forwarded unchanged and in order, each one
written as it passes (`rtrace.core.writer.TraceWriter`, which scrubs secrets and audio payloads with
`rtrace.core.secrets.redact_event`, and secrets split across streamed deltas). Credentials are passed through to the
upstream, never written or printed.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import http
import itertools
import os
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import orjson
from websockets.asyncio.client import ClientConnection, connect
from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus
from websockets.http11 import Request, Response

from ... import __version__
from ...core.escape import shown
from ...core.secrets import redact_event, safe_path, scrub_text
from ...core.writer import Tap, TraceWriter
from .common import (
    MAX_FRAME_BYTES,
    check_ws_url,
    host_for_url,
    trace_write_failed,
    until_stopped,
    upstream_url,
    watch_backlog,
)
from .intercept import intercepting
from .tls import TlsFiles

#: Request headers never forwarded: the websocket handshake is the proxy's own on each side.
_HOP_HEADERS = frozenset(
    {
        "host",
        "upgrade",
        "connection",
        "content-length",
        "transfer-encoding",
        "sec-websocket-key",
        "sec-websocket-version",
        "sec-websocket-extensions",
        "sec-websocket-protocol",
        "sec-websocket-accept",
        "keep-alive",
        "te",
        "trailer",
        "proxy-connection",
        "origin",
    }
)


@dataclasses.dataclass
class RecordOptions:
    """What `rtrace record` is told."""

    upstream: str
    output: str | os.PathLike[str] | None = None
    host: str = "127.0.0.1"
    port: int = 0
    keep_audio: bool = False
    #: Extra header fields (the header line is written whenever a file is recorded).
    header: dict[str, Any] = dataclasses.field(default_factory=dict)
    #: Seconds to wait for the upstream handshake.
    open_timeout: float = 10.0
    #: Given each line of `output` once written (live findings: `rtrace.engine.live.LiveFold.tap`).
    tap: Tap | None = None
    #: Listen on `wss://` with this certificate (`rtrace.net.link.tls`); None: `ws://`.
    tls: TlsFiles | None = None
    #: `--intercept`: an HTTPS proxy in front too, the realtime hosts' tunnels answered here (`net.link.intercept`).
    intercept: bool = False


@dataclasses.dataclass
class _Pending:
    conn: int
    path: str
    upstream: ClientConnection | None = None


def _close_state(ws: ServerConnection | ClientConnection) -> dict[str, Any]:
    out: dict[str, Any] = {}
    rcvd = ws.protocol.close_rcvd
    if rcvd is not None:
        out["code"] = int(rcvd.code)
        if rcvd.reason:
            out["reason"] = scrub_text(rcvd.reason)
    else:
        out["code"] = 1006
    return out


class RecordingProxy:
    """A running recorder: `url` is the websocket base (`ws://127.0.0.1:PORT/v1`), `http_url` the OPENAI_BASE_URL."""

    def __init__(self, options: RecordOptions, writer: TraceWriter | None = None) -> None:
        self.options = options
        self.writer = writer
        if writer is not None and writer.redact is None:
            writer.redact = functools.partial(redact_event, keep_audio=options.keep_audio)
        self._conns = itertools.count(1)
        self._pending: dict[int, _Pending] = {}
        self._server: Server | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        #: The two sockets of each connection being proxied, by conn (`stop` aborts those a close cannot end).
        self._live: dict[int, tuple[ServerConnection, ClientConnection]] = {}
        self._stopping = False
        self.port = 0
        self.connections = 0

    @property
    def url(self) -> str:
        scheme = "wss" if self.options.tls else "ws"
        return f"{scheme}://{host_for_url(self.options.host)}:{self.port}/v1"

    @property
    def http_url(self) -> str:
        return "http" + self.url[2:]

    def _write(self, direction: str, conn: int, event: dict[str, Any]) -> None:
        if self.writer is not None:
            self.writer.write(direction, conn, event)

    def _note(self, conn: int, text: str, **fields: Any) -> None:
        self._write("meta", conn, {"type": "note", "text": text, **fields})

    # -- handshake: the upstream is opened before the client is accepted, so a refusal is passed on as is --------

    async def _process_request(self, ws: ServerConnection, request: Request) -> Response | None:
        conn = next(self._conns)
        self._write("meta", conn, {"type": "connection.opened", "path": safe_path(request.path)})
        try:
            return await self._open_upstream(ws, request, conn)
        except Exception as e:  # nothing may reach a log unscrubbed, and every opened connection is closed
            reason = shown(f"{type(e).__name__}: {e}", 300)
            self._note(conn, f"upstream unreachable: {reason}")
            self._write("meta", conn, {"type": "connection.closed", "by": "recorder", "status": 502})
            return ws.respond(http.HTTPStatus.BAD_GATEWAY, f"rtrace record: upstream unreachable: {reason}\n")

    async def _open_upstream(self, ws: ServerConnection, request: Request, conn: int) -> Response | None:
        path = request.path
        headers = [(k, v) for k, v in request.headers.raw_items() if k.lower() not in _HOP_HEADERS]
        offered = [
            p.strip()
            for value in request.headers.get_all("Sec-WebSocket-Protocol")
            for p in value.split(",")
            if p.strip()
        ]
        target = upstream_url(self.options.upstream, path)
        try:
            upstream = await connect(
                target,
                additional_headers=headers,
                subprotocols=offered or None,  # type: ignore[arg-type]
                user_agent_header=None,
                open_timeout=self.options.open_timeout,
                max_size=MAX_FRAME_BYTES,
                ping_interval=None,
                compression=None,
                proxy=None,
            )
        except InvalidStatus as e:
            status = e.response.status_code
            self._note(conn, f"upstream refused the connection: HTTP {status}", status=status)
            self._write("meta", conn, {"type": "connection.closed", "by": "server", "status": status})
            body = scrub_text(e.response.body.decode("utf-8", "replace"))[:2000] if e.response.body else ""
            try:
                phrase = http.HTTPStatus(status)
            except ValueError:
                phrase = http.HTTPStatus.BAD_GATEWAY
            return ws.respond(phrase, body or f"rtrace record: upstream refused: HTTP {status}\n")
        except (OSError, InvalidHandshake, TimeoutError, asyncio.TimeoutError) as e:
            reason = shown(f"{type(e).__name__}: {e}", 300)
            self._note(conn, f"upstream unreachable: {reason}")
            self._write("meta", conn, {"type": "connection.closed", "by": "server", "status": 502})
            return ws.respond(http.HTTPStatus.BAD_GATEWAY, f"rtrace record: upstream unreachable: {reason}\n")
        self._pending[id(ws)] = _Pending(conn, path, upstream)
        return None

    def _select_subprotocol(self, ws: ServerConnection, offered: Any) -> Any:
        pending = self._pending.get(id(ws))
        if pending is None or pending.upstream is None:
            return None
        return pending.upstream.subprotocol

    # -- frames ---------------------------------------------------------------------------------------------------

    def _log_frame(self, direction: str, conn: int, message: str | bytes) -> None:
        if isinstance(message, bytes):
            self._note(conn, f"{direction} sent a binary frame of {len(message)} bytes (not written)")
            return
        try:
            event = orjson.loads(message)
        except orjson.JSONDecodeError:
            self._note(conn, f"{direction} sent a text frame that is not JSON ({len(message)} chars, not written)")
            return
        if not isinstance(event, dict):
            self._note(conn, f"{direction} sent JSON that is not an object (not written)")
            return
        self._write(direction, conn, event)  # the writer redacts, knowing the stream each delta belongs to

    async def _pump(
        self,
        src: ServerConnection | ClientConnection,
        dst: ServerConnection | ClientConnection,
        direction: str,
        conn: int,
    ) -> None:
        async for message in src:
            self._log_frame(direction, conn, message)
            try:
                await dst.send(message)
            except ConnectionClosed:
                return

    async def _handler(self, ws: ServerConnection) -> None:
        pending = self._pending.pop(id(ws), None)
        if pending is None or pending.upstream is None:
            return
        conn, upstream = pending.conn, pending.upstream
        self.connections += 1
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        self._live[conn] = (ws, upstream)
        to_up = asyncio.create_task(self._pump(ws, upstream, "client", conn))
        to_client = asyncio.create_task(self._pump(upstream, ws, "server", conn))
        over: list[int] = []

        def held(n: int) -> None:
            over.append(n)
            self._note(conn, f"closed 1008: the client read none of the {n} bytes held for it")

        watch = asyncio.create_task(watch_backlog(ws, held))
        by = "client"
        try:
            done, _ = await asyncio.wait({to_up, to_client}, return_when=asyncio.FIRST_COMPLETED)
            by = "client" if to_up in done else "server"
            big = await self._too_big(conn, ws, upstream)
            by = "recorder" if big else by
            first, other = (ws, upstream) if by == "client" else (upstream, ws)
            if by == "client" and (
                ws.protocol.close_rcvd_then_sent is False or (self._stopping and ws.protocol.close_rcvd is None)
            ):
                by = "recorder"  # the recorder closed (or, shutting down, aborted) the client side itself
            rcvd = first.protocol.close_rcvd
            code = int(rcvd.code) if rcvd is not None else 1006
            reason = rcvd.reason if rcvd is not None else ""
            if big:
                pass  # both sides closed 1009 already
            elif code == 1006:
                if by == "server":
                    self._note(conn, "upstream dropped the connection (no close frame); dropping the client too")
                other.transport.abort()
            elif code == 1005:
                await other.close()
            else:
                if by == "server":
                    self._note(conn, f"upstream closed the connection with {code}; closing the client side the same")
                with contextlib.suppress(Exception):
                    await other.close(code, reason)
            await asyncio.wait({to_up, to_client}, timeout=5.0)
        except asyncio.CancelledError:
            by = "recorder"
            raise
        finally:
            for t in (to_up, to_client, watch):
                t.cancel()
            await asyncio.gather(to_up, to_client, watch, return_exceptions=True)
            with contextlib.suppress(Exception):
                await asyncio.wait_for(upstream.close(), 2.0)
            client_state, server_state = _close_state(ws), _close_state(upstream)
            if over:  # the recorder closed the client over the bound (1008) and dropped it
                by, client_state = "recorder", {"code": 1008}
            closed: dict[str, Any] = {"type": "connection.closed", "by": by}
            closed.update(server_state if by == "server" else client_state)
            closed["client"] = client_state
            closed["server"] = server_state
            self._write("meta", conn, closed)
            self._live.pop(conn, None)
            if task is not None:
                self._tasks.discard(task)

    async def _too_big(self, conn: int, ws: ServerConnection, upstream: ClientConnection) -> bool:
        """Whether a side sent a frame over `MAX_FRAME_BYTES` (its connection was closed 1009 for it): then the trace
        says so and the other side is closed 1009 too, as the trace records it."""
        for side, src, dst in (("upstream", upstream, ws), ("client", ws, upstream)):
            sent = src.protocol.close_sent
            if sent is not None and int(sent.code) == 1009:
                self._note(conn, f"the {side} sent a frame over the {MAX_FRAME_BYTES}-byte limit: closed 1009, "
                                 "and the other side 1009 too")  # fmt: skip
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(dst.close(1009, f"the {side} sent a frame over the limit"), 2.0)
                return True
        return False

    async def start(self) -> None:
        o = self.options
        self._server = await serve(
            self._handler,
            o.host,
            o.port,
            process_request=self._process_request,
            select_subprotocol=self._select_subprotocol,
            max_size=MAX_FRAME_BYTES,
            ping_interval=None,
            compression=None,
            server_header=None,
            open_timeout=o.open_timeout + 5.0,  # the upstream's handshake gives up first: the client gets its 502
            ssl=o.tls.context() if o.tls is not None else None,
        )
        sock = next(iter(self._server.sockets))
        self.port = sock.getsockname()[1]

    async def stop(self, grace: float = 1.0) -> None:
        """Close every client connection (1001; each upstream gets the same) and give the handlers `grace` seconds
        to end. A peer that stopped reading cannot take a close frame: then both sockets of its connection are
        aborted, and the handlers, which write `connection.closed` however they end, get half a second more
        before they are cancelled. Within 2 s of SIGTERM, whatever the peers do."""
        self._stopping = True
        if self._server is not None:
            self._server.close()
            try:
                await asyncio.wait_for(asyncio.shield(self._server.wait_closed()), grace)
            except asyncio.TimeoutError:
                for ws, upstream in list(self._live.values()):
                    ws.transport.abort()
                    upstream.transport.abort()
                try:
                    await asyncio.wait_for(asyncio.shield(self._server.wait_closed()), 0.5)
                except asyncio.TimeoutError:
                    for task in list(self._tasks):
                        task.cancel()
                    await asyncio.gather(*self._tasks, return_exceptions=True)
                    await self._server.wait_closed()
            self._server = None
        for pending in self._pending.values():
            if pending.upstream is not None:
                pending.upstream.transport.abort()
        self._pending.clear()


#: What makes a recorder from its options and writer (`RecordingProxy`, or `link.LinkProxy` with its faults).
MakeProxy = Callable[[RecordOptions, TraceWriter | None], RecordingProxy]


@contextlib.asynccontextmanager
async def run_proxy(options: RecordOptions, make: MakeProxy = RecordingProxy) -> AsyncIterator[RecordingProxy]:
    """Run a recorder (`make`'s: a `link.LinkProxy` injects faults) for the duration of the block; the trace is
    complete when it exits."""
    writer = None
    if options.output is not None:
        header = {"recorder": "rtrace record", "version": __version__, **options.header}
        redact = functools.partial(redact_event, keep_audio=options.keep_audio)
        writer = TraceWriter.open(options.output, header, time.monotonic, trace_write_failed, redact, tap=options.tap)
    proxy = make(options, writer)
    try:
        await proxy.start()
        yield proxy
    finally:
        await proxy.stop()
        if writer is not None:
            writer.close()


def check_upstream(url: str) -> str:
    """`url` if every connection can be forwarded to it (`common.check_ws_url`); raises ValueError otherwise."""
    return check_ws_url(url, "--upstream")


async def record_forever(
    options: RecordOptions, announce: Callable[[RecordingProxy, dict[str, str]], None], make: MakeProxy = RecordingProxy
) -> None:
    """`rtrace record`'s proxy, `announce`d with what `--intercept` gives the client, until Ctrl-C or SIGTERM."""
    async with run_proxy(options, make) as proxy, intercepting(options.intercept, proxy.port) as proxied:
        announce(proxy, proxied)
        await until_stopped()


__all__ = [
    "RecordOptions",
    "RecordingProxy",
    "check_upstream",
    "record_forever",
    "run_proxy",
]
