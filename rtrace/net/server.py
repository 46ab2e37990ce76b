"""`rtrace serve`: the asyncio layer around `rtrace.net.endpoint`. It only moves frames and time.

Owns the websocket handshake (path, any API key, subprotocols), the per-connection send queue that applies latency
without ever reordering events, the trace recorder, and task hygiene (a client that leaves takes its tasks with it).
Protocol decisions belong to `rtrace.net.endpoint`; nothing here looks inside an event except its `type` (and the
recorder, for secrets to scrub).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import http
import itertools
import os
import random
import sys
import time
import urllib.parse
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import IO, Any

import orjson
from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response

from .. import __version__
from ..core.secrets import may_hold_secret, safe_path, scrub_secrets
from ..core.trace import encode
from ..core.writer import Clock, TraceWriter
from .common import (
    MAX_FRAME_BYTES,
    host_for_url,
    parse_duration,
    parse_latencies,
    trace_write_failed,
    until_stopped,
    warn_unless_loopback,
)
from .endpoint import EndpointConnection, EndpointOptions, SharedCounters
from .faults import Faults
from .playback import ResponseSource, recorded_responses
from .wire import Emission, decode_frame

#: Paths that accept the realtime handshake (the query string, e.g. `?model=...`, is free).
PATHS = ("/v1/realtime", "/realtime", "/v1/realtime/", "/realtime/")

Sleep = Callable[[float], Awaitable[Any]]


@dataclasses.dataclass
class ServerOptions:
    """Everything `rtrace serve` can be told. Durations are seconds."""

    host: str = "127.0.0.1"
    port: int = 0
    #: Delay of every server event (seconds), unless `latency_by_type` names its type.
    latency: float = 0.0
    latency_by_type: dict[str, float] = dataclasses.field(default_factory=dict)
    #: Each event's delay varies uniformly in [-jitter, +jitter] (never below 0, never reordering).
    jitter: float = 0.0
    seed: int | None = None
    #: Write every received and sent event here (native trace format), line by line.
    record: str | os.PathLike[str] | None = None
    #: Take the server's responses from this recorded trace, in order, with their recorded pacing.
    from_trace: str | os.PathLike[str] | None = None
    endpoint: EndpointOptions = dataclasses.field(default_factory=EndpointOptions)
    # Faults (see `rtrace.net.faults.Faults`).
    close_after: int | None = None
    drop_on: list[str] = dataclasses.field(default_factory=list)
    fail_response: set[int] = dataclasses.field(default_factory=set)
    error_on: list[str] = dataclasses.field(default_factory=list)
    expire_after: float | None = None
    #: How many times each fault fires in the server's life (None: every time); see `Faults.times`.
    fault_times: int | None = 1
    max_frame_bytes: int = MAX_FRAME_BYTES
    #: Injected for tests: a monotonic clock (seconds) and the matching sleep.
    clock: Clock = time.monotonic
    sleep: Sleep = asyncio.sleep

    def faults(self) -> Faults:
        return Faults(
            close_after=self.close_after,
            drop_on=list(self.drop_on),
            fail_response=set(self.fail_response),
            error_on=list(self.error_on),
            expire_after=self.expire_after,
            times=self.fault_times,
        )

    def latency_of(self, event_type: str) -> float:
        return self.latency_by_type.get(event_type, self.latency)


class Recorder(TraceWriter):
    """The server's trace: one flushed line per event, secrets scrubbed first (`rtrace.core.secrets.scrub_secrets`)."""

    def write(self, direction: str, conn: int, event: dict[str, Any], raw: bytes | None = None) -> None:
        if raw is None:
            raw = encode(event)
        if may_hold_secret(raw):
            # Keys, bearer tokens, `client_secret`s, `ek_...` never reach a trace (`core.secrets` says which
            # events can hold one; scrubbing every event costs more than the latency being measured).
            raw = encode(scrub_secrets(event))
        super().write(direction, conn, event, raw)


class _Outbox:
    """One connection's send queue. Each event is due `latency(type) ± jitter` after it was produced, but never
    before the event queued ahead of it: a websocket is ordered, so latency delays and never reorders."""

    def __init__(
        self,
        ws: ServerConnection,
        opts: ServerOptions,
        rng: random.Random,
        on_sent: Callable[[dict[str, Any], bytes], None],
    ) -> None:
        self.ws = ws
        self.opts = opts
        self.rng = rng
        self.on_sent = on_sent
        self.queue: asyncio.Queue[tuple[float, Emission]] = asyncio.Queue()
        self.last_due = 0.0

    def put(self, em: Emission) -> None:
        now = self.opts.clock()
        if em.event is not None:
            delay = self.opts.latency_of(str(em.event.get("type")))
            if self.opts.jitter:
                delay = max(0.0, delay + self.rng.uniform(-self.opts.jitter, self.opts.jitter))
            due = max(now + delay, self.last_due)
        else:
            due = self.last_due
        self.last_due = due
        self.queue.put_nowait((due, em))

    async def run(self) -> None:
        clock, sleep = self.opts.clock, self.opts.sleep
        while True:
            due, em = await self.queue.get()
            wait = due - clock()
            if wait > 0:
                await sleep(wait)
            if em.close is not None:
                await self.ws.close(*em.close)
                return
            if em.event is not None:
                raw = orjson.dumps(em.event)
                await self.ws.send(raw, text=True)
                self.on_sent(em.event, raw)


class _Session:
    """One websocket: the endpoint, its outbox, and the tasks that wait out the endpoint's pauses."""

    def __init__(self, server: RealtimeServer, ws: ServerConnection, conn: int) -> None:
        self.server = server
        self.ws = ws
        self.conn = conn
        opts = server.options
        self.endpoint = EndpointConnection(conn, opts.endpoint, opts.faults(), server.shared, server.source)
        rng = random.Random(f"{opts.seed}:{conn}") if opts.seed is not None else random.Random()
        self.outbox = _Outbox(ws, opts, rng, lambda ev, raw: server.record("server", conn, ev, raw))
        self.tasks: set[asyncio.Task[None]] = set()
        self.sender: asyncio.Task[None] | None = None
        self.closer: asyncio.Task[None] | None = None

    def deliver(self, ems: list[Emission]) -> None:
        """Carry out emissions in order; from the first pause on, the rest waits in a task of its own."""
        for i, em in enumerate(ems):
            if em.delay > 0:
                task = asyncio.get_running_loop().create_task(self._later(ems[i:]))
                self.tasks.add(task)
                task.add_done_callback(self.tasks.discard)
                return
            self._do(em)

    async def _later(self, ems: list[Emission]) -> None:
        clock, sleep = self.server.options.clock, self.server.options.sleep
        target = clock()
        for em in ems:
            if em.delay > 0:
                target += em.delay
                wait = target - clock()
                if wait > 0:
                    await sleep(wait)
            self._do(em)

    def _do(self, em: Emission) -> None:
        if em.meta is not None:
            self.server.record("meta", self.conn, em.meta)
        if em.event is not None:
            self.outbox.put(em)
        if em.wake is not None:
            self.deliver(self.endpoint.wake(em.wake))
        if em.close is not None:
            if em.flush:
                self.outbox.put(em)
            elif self.closer is None:
                # A network drop: what is still queued never leaves.
                if self.sender is not None:
                    self.sender.cancel()
                self.closer = asyncio.get_running_loop().create_task(self.ws.close(*em.close))

    async def serve(self) -> None:
        sender = self.sender = asyncio.get_running_loop().create_task(self.outbox.run())
        try:
            self.deliver(self.endpoint.open())
            max_event = self.server.options.endpoint.max_event_bytes
            async for message in self.ws:
                decoded = decode_frame(message, max_event)
                if isinstance(decoded, dict):
                    self.server.record("client", self.conn, decoded)
                    self.deliver(self.endpoint.receive(decoded))
                else:
                    size = len(message)
                    self.server.record(
                        "meta",
                        self.conn,
                        {"type": "note", "note": f"frame rejected ({size} bytes)", "code": decoded.code},
                    )
                    self.deliver(self.endpoint.frame_error(decoded))
                if self.endpoint.closed:
                    break
            if self.endpoint.closed:
                # Let the outbox deliver up to the close it was given (or the drop happen).
                with contextlib.suppress(ConnectionClosed, asyncio.CancelledError):
                    await (self.closer or sender)
        except ConnectionClosed:
            pass
        finally:
            for task in list(self.tasks):
                task.cancel()
            if not sender.done():
                sender.cancel()
            await asyncio.gather(sender, *self.tasks, *([self.closer] if self.closer else []), return_exceptions=True)
            with contextlib.suppress(Exception):
                await self.ws.close()
            note: dict[str, Any] = {"type": "connection.closed"}
            if self.ws.close_code is not None:
                note["code"] = self.ws.close_code
            if self.ws.close_reason:
                note["reason"] = self.ws.close_reason
            self.server.record("meta", self.conn, note)


class RealtimeServer:
    """A running fake endpoint: `url` is the websocket base (`ws://127.0.0.1:PORT/v1`), `http_url` what
    `OPENAI_BASE_URL` wants."""

    def __init__(self, options: ServerOptions) -> None:
        self.options = options
        self.shared = SharedCounters()
        self.source: ResponseSource | None = None
        if options.from_trace is not None:
            from ..core.loader import TraceReader

            with TraceReader.open(options.from_trace) as reader:
                self.source = ResponseSource(recorded_responses(reader))
        self.recorder: Recorder | None = None
        self._conns = itertools.count(1)
        self.sessions: set[_Session] = set()
        self.port = 0
        self.host = options.host
        self._server: Server | None = None

    @property
    def url(self) -> str:
        return f"ws://{host_for_url(self.host)}:{self.port}/v1"

    @property
    def http_url(self) -> str:
        return f"http://{host_for_url(self.host)}:{self.port}/v1"

    @property
    def connections(self) -> int:
        """How many connections are open now."""
        return len(self.sessions)

    def record(self, direction: str, conn: int, event: dict[str, Any], raw: bytes | None = None) -> None:
        if self.recorder is not None:
            self.recorder.write(direction, conn, event, raw)  # the recorder scrubs secrets

    def _process_request(self, ws: ServerConnection, request: Request) -> Response | None:
        path = urllib.parse.urlsplit(request.path).path
        if path not in PATHS:
            return ws.respond(http.HTTPStatus.NOT_FOUND, "rtrace serve: the realtime endpoint is /v1/realtime\n")
        return None

    @staticmethod
    def _select_subprotocol(ws: ServerConnection, offered: Any) -> Any:
        # Browsers send the key as `openai-insecure-api-key.<key>` next to `realtime`; only `realtime` is chosen.
        return "realtime" if "realtime" in offered else None

    async def _handler(self, ws: ServerConnection) -> None:
        conn = next(self._conns)
        path = ws.request.path if ws.request is not None else ""
        self.record("meta", conn, {"type": "connection.opened", "path": safe_path(path)})
        session = _Session(self, ws, conn)
        self.sessions.add(session)
        try:
            await session.serve()
        finally:
            self.sessions.discard(session)

    async def start(self) -> None:
        o = self.options
        if o.record is not None:
            header = {
                "recorder": f"rtrace serve {__version__}",
                "latency": o.latency,
                "latency_by_type": o.latency_by_type,
                "jitter": o.jitter,
            }
            self.recorder = Recorder.open(o.record, header, o.clock, trace_write_failed)
        self._server = await serve(
            self._handler,
            o.host,
            o.port,
            process_request=self._process_request,
            select_subprotocol=self._select_subprotocol,
            max_size=o.max_frame_bytes,
            ping_interval=None,
            compression=None,
        )
        sock = next(iter(self._server.sockets))
        self.port = sock.getsockname()[1]

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None
        if self.recorder is not None:
            self.recorder.close()


@contextlib.asynccontextmanager
async def run_server(options: ServerOptions | None = None) -> AsyncIterator[RealtimeServer]:
    """Run a fake endpoint for the duration of the block::

    async with run_server(ServerOptions(latency=0.05, record="out.jsonl")) as srv:
        ...  # connect to f"{srv.url}/realtime?model=gpt-realtime"
    """
    server = RealtimeServer(options or ServerOptions())
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


async def serve_forever(options: ServerOptions, announce: Callable[[RealtimeServer], None]) -> None:
    """Run until cancelled, Ctrl-C or SIGTERM; the trace is complete when this returns."""
    async with run_server(options) as server:
        announce(server)
        sys.stdout.flush()
        await until_stopped()


def options_from_cli(
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    latency: list[str] | None = None,
    jitter: str = "0",
    seed: int | None = None,
    record: str | None = None,
    from_trace: str | None = None,
    close_after: int | None = None,
    drop_on: list[str] | None = None,
    fail_response: list[int] | None = None,
    error_on: list[str] | None = None,
    expire_after: str | None = None,
    duplicate_id: str = "append_duplicate",
    story_chunk_delay: str | None = None,
    fault_times: int | None = 1,
) -> ServerOptions:
    """`ServerOptions` from command-line strings. Raises ValueError with a message for people."""
    default, by_type = parse_latencies(latency or [])
    endpoint = EndpointOptions()
    if duplicate_id not in ("append_duplicate", "ignore", "reject"):
        raise ValueError(f"--duplicate-id must be append_duplicate, ignore or reject, not {duplicate_id!r}")
    endpoint.duplicate_id = duplicate_id  # type: ignore[assignment]
    if story_chunk_delay is not None:
        endpoint.story_chunk_delay = parse_duration(story_chunk_delay)
    if from_trace is not None and not os.path.isfile(from_trace):
        raise ValueError(f"{from_trace}: no such trace file")
    return ServerOptions(
        host=host,
        port=port,
        latency=default,
        latency_by_type=by_type,
        jitter=parse_duration(jitter),
        seed=seed,
        record=record,
        from_trace=from_trace,
        endpoint=endpoint,
        close_after=close_after,
        drop_on=[v for value in drop_on or [] for v in value.split(",") if v],
        fail_response=set(fail_response or []),
        error_on=[v for value in error_on or [] for v in value.split(",") if v],
        expire_after=parse_duration(expire_after) if expire_after is not None else None,
        fault_times=fault_times,
    )


def serve_main(options: ServerOptions, out: IO[str] = sys.stdout, err: IO[str] = sys.stderr) -> None:
    """`rtrace serve`: print where to connect, then serve until Ctrl-C or SIGTERM."""
    warn_unless_loopback(options.host, "connect (no authentication)", err)

    def announce(server: RealtimeServer) -> None:
        print(f"rtrace serve: listening on {server.url}", file=out)
        print(f"  OPENAI_BASE_URL={server.http_url}", file=out)
        print(f"  RTRACE_URL={server.url}", file=out)
        if options.record is not None:
            print(f"  recording to {options.record}", file=out)
        print("  Ctrl-C to stop.", file=out)
        out.flush()

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve_forever(options, announce))


__all__ = [
    "RealtimeServer",
    "ServerOptions",
    "options_from_cli",
    "run_server",
    "serve_forever",
    "serve_main",
]
