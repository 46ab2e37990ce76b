"""`rtrace serve`: the asyncio layer around `rtrace.net.fake.endpoint`. It only moves frames and time.

Owns the websocket handshake (path, any API key, subprotocols), the per-connection send queue that applies latency
without ever reordering events, the trace recorder, and task hygiene (a client that leaves takes its tasks with it).
Protocol decisions belong to `rtrace.net.fake.endpoint`; nothing here looks inside an event except its `type` (and the
recorder, for secrets to scrub).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import heapq
import http
import itertools
import json
import os
import random
import sys
import time
import traceback
import urllib.parse
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import orjson
from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response
from websockets.protocol import State

from ... import __version__
from ...core.durations import format_duration, parse_latencies
from ...core.inputs import TooDeep, check_nesting
from ...core.secrets import may_hold_secret, safe_path, scrub_secrets, scrub_text
from ...core.trace import encode
from ...core.writer import Clock, Tap, TraceWriter
from ..fake.endpoint import EndpointConnection, EndpointOptions, SharedCounters
from ..fake.options import ENDPOINT_OPTIONS, OPTION_BY_FIELD
from ..fake.playback import ResponseSource, recorded_responses
from ..fake.wire import Emission, decode_frame
from ..faults.flags import ABNORMAL, NO_STATUS, Faults, check_specs
from ..faults.script import Schedule, load_script
from .common import (
    MAX_FRAME_BYTES,
    Quiet,
    host_for_url,
    trace_write_failed,
    until_stopped,
    watch_backlog,
)
from .lateness import Lateness
from .tls import TlsFiles, tls_files


@dataclasses.dataclass(frozen=True)
class Route:
    """A path that accepts the realtime handshake (with or without a trailing slash; `{deployment}` is one path
    segment), the protocol family its clients speak, and the query parameters they add."""

    path: str
    family: str
    query: str = ""

    def match(self, path: str) -> str | None:
        """The deployment named in `path` ("" when the route names none); None: not this route."""
        head, sep, tail = self.path.partition("{deployment}")
        if not sep:
            return "" if path == self.path else None
        if path.startswith(head) and path.endswith(tail) and len(path) > len(head) + len(tail):
            middle = path[len(head) : len(path) - len(tail)]
            return None if "/" in middle else urllib.parse.unquote(middle)
        return None

    def __str__(self) -> str:
        return self.path + (f"?{self.query}" if self.query else "")


#: Every path a realtime client of the OpenAI, Azure OpenAI or Voice Live protocol asks for (as their SDKs build it
#: from a base URL): OpenAI's full URL and the base URLs a client adds `/realtime` to; Azure OpenAI's preview path
#: (the openai Python SDK's `AzureOpenAI`, livekit's Azure plugin), its GA v1 path (the openai Node SDK 7's
#: `AzureOpenAI`), and a base URL naming the deployment; Voice Live's (`azure-ai-voicelive`). The model of the
#: session is the `model` query parameter, else `deployment`, else the deployment in the path.
ROUTES = (
    Route("/v1/realtime", "openai", "model=..."),
    Route("/realtime", "openai", "model=..."),
    Route("/v1", "openai"),
    Route("/", "openai"),
    Route("/openai/realtime", "azure-openai", "api-version=...&deployment=..."),
    Route("/openai/v1/realtime", "azure-openai", "model=..."),
    Route("/openai/deployments/{deployment}/realtime", "azure-openai", "api-version=..."),
    Route("/voice-live/realtime", "voice-live", "api-version=...&model=..."),
)
#: The paths alone (what `RealtimeServer.url` and the clients of earlier versions rely on).
PATHS = tuple(r.path for r in ROUTES)


def speaks_ga(ws: ServerConnection, route: Route | None) -> bool:
    """Whether the client speaks the GA protocol, whose published schema serve checks client events against: not
    a beta client (`OpenAI-Beta: realtime=v1`), not Azure's preview API (an `api-version` naming a preview: the
    beta protocol), not Voice Live (its own session fields, such as `modalities`, on the beta shape)."""
    if route is not None and route.family == "voice-live":
        return False
    request = ws.request
    if request is None:
        return True
    if "realtime=v1" in request.headers.get("OpenAI-Beta", "").replace(" ", ""):
        return False
    version = "".join(urllib.parse.parse_qs(urllib.parse.urlsplit(request.path).query).get("api-version", []))
    return not (route is not None and route.family == "azure-openai" and "preview" in version)


def route_of(target: str) -> tuple[Route, str | None] | None:
    """The route a request target (path and query) asks for, and the model it names (None: none named)."""
    parts = urllib.parse.urlsplit(target)
    path = parts.path.rstrip("/") or "/"
    for route in ROUTES:
        deployment = route.match(path)
        if deployment is None:
            continue
        query = dict(urllib.parse.parse_qsl(parts.query, keep_blank_values=False))
        return route, query.get("model") or query.get("deployment") or deployment or None
    return None


def accepted_paths() -> str:
    """The accepted paths, for a refusal."""
    return ", ".join(str(r) for r in ROUTES)

Sleep = Callable[[float], Awaitable[Any]]


@dataclasses.dataclass
class ServerOptions:
    """Everything `rtrace serve` can be told. Durations are seconds."""

    host: str = "127.0.0.1"
    port: int = 0
    #: Delay of every server event (seconds), unless `latency_by_type` names its type.
    latency: float = 0.0
    latency_by_type: dict[str, float] = dataclasses.field(default_factory=dict)
    #: Each event's delay varies uniformly in [-jitter, +jitter] (never below 0, never reordering), unless
    #: `jitter_by_type` names its type.
    jitter: float = 0.0
    jitter_by_type: dict[str, float] = dataclasses.field(default_factory=dict)
    seed: int | None = None
    #: Write every received and sent event here (native trace format), line by line.
    record: str | os.PathLike[str] | None = None
    #: Given each line of `record` once written (live findings: `rtrace.engine.live.LiveFold.tap`).
    tap: Tap | None = None
    #: Take the server's responses from this recorded trace, in order, with their recorded pacing.
    from_trace: str | os.PathLike[str] | None = None
    endpoint: EndpointOptions = dataclasses.field(default_factory=EndpointOptions)
    #: More fields of the recorded trace's header (`rtrace hunt` writes its seed and schedule there).
    header: dict[str, Any] = dataclasses.field(default_factory=dict)
    #: What the endpoint answers and breaks when: the fault flags' turns and a script's (`rtrace.net.faults.script`).
    schedule: Schedule = dataclasses.field(default_factory=Schedule)
    max_frame_bytes: int = MAX_FRAME_BYTES
    #: Seconds `stop` waits for each open connection's closing handshake before it drops the connection.
    close_timeout: float = 10.0
    #: Where the server tells the user what it refused (a handshake on another path, a request that is not a
    #: websocket upgrade), one line each; None: stderr.
    log: Callable[[str], None] | None = None
    #: Serve `wss://` with this certificate (`rtrace.net.link.tls`); None: `ws://`.
    tls: TlsFiles | None = None
    #: Injected for tests: a monotonic clock (seconds) and the matching sleep.
    clock: Clock = time.monotonic
    sleep: Sleep = asyncio.sleep

    def latency_of(self, event_type: str) -> float:
        return self.latency_by_type.get(event_type, self.latency)

    def jitter_of(self, event_type: str) -> float:
        return self.jitter_by_type.get(event_type, self.jitter)


#: Seconds a line with no frame after it (a client event not answered yet, a note) waits before it is written.
FLUSH_EVERY = 0.05


class Recorder(TraceWriter):
    """The server's trace: a line per event, secrets scrubbed first (`rtrace.core.secrets.scrub_secrets`), buffered
    and handed to the kernel before each frame is sent (`flush`), so a killed server leaves every frame a client
    saw in the trace; what waits is only what no frame answered yet (flushed within `FLUSH_EVERY` seconds)."""

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
    before the event queued ahead of it: a websocket is ordered, so latency delays and never reorders; but for an
    `ahead` event (a schema error, answered on receipt), which goes before what waits and is not yet due. Notes and
    a close queued here are carried out in their turn (a fault's note is written where it acts)."""

    def __init__(
        self,
        ws: ServerConnection,
        opts: ServerOptions,
        rng: random.Random,
        on_sent: Callable[[dict[str, Any], bytes], None],
        on_meta: Callable[[dict[str, Any]], None],
        close: Callable[[int, str], Awaitable[None]],
    ) -> None:
        self.ws = ws
        self.opts = opts
        self.rng = rng
        self.on_sent = on_sent
        self.on_meta = on_meta
        self.close = close
        #: (due, order, emission), the earliest first: in the order put, but for `ahead` events.
        self.queue: list[tuple[float, int, Emission]] = []
        self.filled = asyncio.Event()
        self.last_due = 0.0
        self.count = 0
        self.lateness: Lateness | None = None

    def put(self, em: Emission) -> None:
        now = self.opts.clock()
        if em.event is not None:
            etype = str(em.event.get("type"))
            delay = self.opts.latency_of(etype)
            jitter = self.opts.jitter_of(etype)
            if jitter:
                delay = max(0.0, delay + self.rng.uniform(-jitter, jitter))
            if em.ahead:  # answered on receipt: none of the latency that answers to processed events wait out
                due = now + em.hold
            else:
                due = self.last_due = max(now + delay + em.hold, self.last_due)
        else:
            due = self.last_due = max(now + em.hold, self.last_due) if em.hold > 0 else self.last_due
        self.count += 1
        heapq.heappush(self.queue, (due, -self.count if em.ahead else self.count, em))
        self.filled.set()

    async def run(self) -> None:
        clock, sleep = self.opts.clock, self.opts.sleep
        while True:
            if not self.queue:
                self.filled.clear()
                await self.filled.wait()
                continue
            due = self.queue[0][0]
            wait = due - clock()
            if wait > 0:
                await sleep(wait)
                continue  # an `ahead` event may have come meanwhile
            due, _, em = heapq.heappop(self.queue)
            if em.meta is not None:
                self.on_meta(em.meta)
            if em.event is not None:
                if self.lateness is not None:
                    self.lateness.sent(clock() - due)
                raw = orjson.dumps(em.event)
                self.on_sent(em.event, raw)  # in the trace (and the kernel) before the frame leaves
                await self.ws.send(raw, text=True)
            if em.close is not None:
                await self.close(*em.close)
                return


class _Session:
    """One websocket: the endpoint, its outbox, and the tasks that wait out the endpoint's pauses."""

    def __init__(
        self, server: RealtimeServer, ws: ServerConnection, conn: int, model: str | None = None, ga: bool = True
    ) -> None:
        self.server = server
        self.ws = ws
        self.conn = conn
        opts = server.options
        endpoint = dataclasses.replace(opts.endpoint, model=model) if model else opts.endpoint
        if not ga and endpoint.validate:  # the GA schema judges only clients that speak GA (`speaks_ga`)
            endpoint = dataclasses.replace(endpoint, validate=False)
        self.endpoint = EndpointConnection(conn, endpoint, opts.schedule, server.shared, server.source)
        rng = random.Random(f"{opts.seed}:{conn}") if opts.seed is not None else random.Random()
        self.outbox = _Outbox(
            ws,
            opts,
            rng,
            lambda ev, raw: server.record("server", conn, ev, raw, sent=True),
            lambda note: server.record("meta", conn, note),
            self.close,
        )
        self.outbox.lateness = server.lateness
        self.tasks: set[asyncio.Task[None]] = set()
        self.sender: asyncio.Task[None] | None = None
        self.closer: asyncio.Task[None] | None = None
        #: Whether this connection's `connection.closed` is in the trace (written once, as soon as the close is
        #: sent or seen: before the server can accept the client's next handshake).
        self.close_noted = False

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
        if em.wake is not None:
            self.deliver(self.endpoint.wake(em.wake))
        if not em.flush:
            # A network drop: the note now, and what is still queued never leaves.
            if em.meta is not None:
                self.server.record("meta", self.conn, em.meta)
            if em.close is not None and self.closer is None:
                if self.sender is not None:
                    self.sender.cancel()
                self.note_closed("server", em.close[0], em.close[1])
                self.closer = asyncio.get_running_loop().create_task(self.close(*em.close))
        elif em.event is not None or em.meta is not None or em.close is not None:
            self.outbox.put(em)

    def note_closed(self, by: str, code: int | None, reason: str | None) -> None:
        """Write this connection's `connection.closed` (once)."""
        if self.close_noted:
            return
        self.close_noted = True
        note: dict[str, Any] = {"type": "connection.closed", "by": by}
        if code is not None:
            note["code"] = code
        if reason:
            note["reason"] = reason
        self.server.record("meta", self.conn, note)

    async def close(self, code: int, reason: str) -> None:
        """Close the websocket as the endpoint asked: 1006 ends the TCP connection with no close frame, 1005 sends
        a close frame without a code, any other code a close frame with it."""
        self.note_closed("server", code, reason)
        self.server.flush_trace()  # the close is in the trace before the peer sees it
        if code == ABNORMAL:
            transport = self.ws.transport
            if transport is not None:
                transport.abort()
            return
        if code == NO_STATUS:
            await self.ws.close(None)  # type: ignore[arg-type]
            return
        await self.ws.close(code, reason)

    def note_peer_close(self) -> None:
        """The connection ended without the endpoint closing it: say who closed it, with the code seen."""
        proto = self.ws.protocol
        if proto.close_sent is not None and proto.close_rcvd_then_sent is not True:
            self.note_closed("server", proto.close_sent.code, proto.close_sent.reason)
        else:
            self.note_closed("client", self.ws.close_code, self.ws.close_reason)

    def _backlog(self, held: int) -> None:
        note = f"closed 1008: the client read none of the {held} bytes held for it (pongs, events): over the bound"
        self.server.record("meta", self.conn, {"type": "note", "note": note})

    async def serve(self) -> None:
        sender = self.sender = asyncio.get_running_loop().create_task(self.outbox.run())
        self.tasks.add(asyncio.get_running_loop().create_task(watch_backlog(self.ws, self._backlog)))
        try:
            self.deliver(self.endpoint.open(time.time()))
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
            if self.ws.protocol.close_rcvd is not None or self.ws.protocol.state is State.CLOSED:
                self.note_peer_close()  # the client closed, or the network did: noted before anything waits
            for task in list(self.tasks):
                task.cancel()
            if not sender.done():
                sender.cancel()
            await asyncio.gather(sender, *self.tasks, *([self.closer] if self.closer else []), return_exceptions=True)
            with contextlib.suppress(Exception):
                await self.ws.close()
            self.note_peer_close()


class RealtimeServer:
    """A running fake endpoint: `url` is the websocket base (`ws://127.0.0.1:PORT/v1`, for clients that add
    `/realtime?model=...` themselves), `http_url` what `OPENAI_BASE_URL` wants, `realtime_url` the full websocket
    URL (`ws://127.0.0.1:PORT/v1/realtime?model=gpt-realtime`, for clients that use the URL as given)."""

    def __init__(self, options: ServerOptions) -> None:
        self.options = options
        self.shared = SharedCounters()
        self.source: ResponseSource | None = None
        if options.from_trace is not None:
            from ...core.loader import TraceReader

            with TraceReader.open(options.from_trace) as reader:
                self.source = ResponseSource(recorded_responses(reader))
        self.recorder: Recorder | None = None
        #: How late the events sent left (`net.link.lateness`): warned of past its bound, summed up when serve stops.
        self.lateness = Lateness(options.clock, options.log or _stderr)
        self._flusher: asyncio.Task[None] | None = None
        self._conns = itertools.count(1)
        self.sessions: set[_Session] = set()
        self.port = 0
        self.host = options.host
        self._server: Server | None = None
        #: When the last event was recorded, when a fault last acted, whether a response was done since
        #: (`hung_after_fault`).
        self.quiet = Quiet()
        #: Tracebacks of the exceptions raised inside the server while it served (rtrace's own failures).
        self.internal_errors: list[str] = []

    def hung_after_fault(self, quiet: float) -> bool:
        """Whether a fault acted, no response was done since, a connection is open (the new one, or the one a fault
        did not close) and nothing went either way for `quiet` seconds: the client hangs on the turn the fault broke
        (a hunt ends such a run early instead of waiting out its deadline). A client with no connection open is
        between connections - backing off before it reconnects, or gone - and is left to its deadline."""
        return self.quiet.hung(quiet, bool(self.sessions))

    @property
    def url(self) -> str:
        scheme = "wss" if self.options.tls else "ws"
        return f"{scheme}://{host_for_url(self.host)}:{self.port}/v1"

    @property
    def http_url(self) -> str:
        scheme = "https" if self.options.tls else "http"
        return f"{scheme}://{host_for_url(self.host)}:{self.port}/v1"

    @property
    def realtime_url(self) -> str:
        model = urllib.parse.quote(self.options.endpoint.model, safe="")
        return f"{self.url}/realtime?model={model}"

    @property
    def connections(self) -> int:
        """How many connections are open now."""
        return len(self.sessions)

    def record(
        self, direction: str, conn: int, event: dict[str, Any], raw: bytes | None = None, sent: bool = False
    ) -> None:
        """Put `event` in the trace; `sent`: it is about to leave as a frame, so it reaches the kernel now."""
        self.quiet.saw(direction, event)
        if self.recorder is not None:
            self.recorder.write(direction, conn, event, raw)  # the recorder scrubs secrets
            if sent:
                self.recorder.flush()

    def flush_trace(self) -> None:
        """Hand what the trace holds to the kernel (before a frame leaves; and every `FLUSH_EVERY` seconds)."""
        if self.recorder is not None:
            self.recorder.flush()

    async def _flush_every(self) -> None:
        while True:
            await asyncio.sleep(FLUSH_EVERY)
            self.flush_trace()

    def _process_request(self, ws: ServerConnection, request: Request) -> Response | None:
        if route_of(request.path) is None:
            return ws.respond(
                http.HTTPStatus.NOT_FOUND,
                f"rtrace serve: no realtime endpoint at this path; the accepted paths are {accepted_paths()}\n",
            )
        return None

    def _process_response(self, ws: ServerConnection, request: Request, response: Response) -> None:
        """A refused handshake (another path, not a websocket upgrade) is a connection of the trace that opened
        and was closed by the server with that HTTP status, and a line for the user (no key in either)."""
        if response.status_code == http.HTTPStatus.SWITCHING_PROTOCOLS:
            return
        conn = next(self._conns)
        path = safe_path(request.path)
        why = response.reason_phrase or ""
        body = response.body.decode("utf-8", "replace").strip() if response.body else ""
        self.record("meta", conn, {"type": "connection.opened", "path": path})
        note = f"handshake refused: HTTP {response.status_code} {why} for {path}" + (f": {body}" if body else "")
        self.record("meta", conn, {"type": "note", "note": note})
        self.record("meta", conn, {"type": "connection.closed", "by": "server", "status": response.status_code})
        self.flush_trace()
        log = self.options.log or _stderr
        refused_path = response.status_code == http.HTTPStatus.NOT_FOUND
        known = f" (the accepted paths are {accepted_paths()})" if refused_path else ""
        log(f"rtrace serve: refused a handshake: HTTP {response.status_code} {why} for {path}{known}")

    @staticmethod
    def _select_subprotocol(ws: ServerConnection, offered: Any) -> Any:
        # Browsers send the key as `openai-insecure-api-key.<key>` next to `realtime`; only `realtime` is chosen.
        return "realtime" if "realtime" in offered else None

    async def _handler(self, ws: ServerConnection) -> None:
        conn = next(self._conns)
        path = ws.request.path if ws.request is not None else ""
        opened: dict[str, Any] = {"type": "connection.opened", "path": safe_path(path)}
        found = route_of(path)
        model = None
        if found is not None:
            opened["route"] = found[0].path
            opened["protocol"] = found[0].family
            model = found[1]
            if model:
                opened["model"] = scrub_text(model)
        try:
            self.record("meta", conn, opened)
            session = _Session(self, ws, conn, model, speaks_ga(ws, found[0] if found else None))
            self.sessions.add(session)
            try:
                await session.serve()
            finally:
                self.sessions.discard(session)
        except (ConnectionClosed, asyncio.CancelledError):
            raise
        except Exception:  # a fault of rtrace, not of the client: kept for the runner (a hunt discards the run)
            self.internal_errors.append(traceback.format_exc())
            raise

    async def start(self) -> None:
        o = self.options
        if o.record is not None:
            header = {
                "recorder": f"rtrace serve {__version__}",
                "latency": o.latency,
                "latency_by_type": o.latency_by_type,
                "jitter": o.jitter,
                **({"jitter_by_type": o.jitter_by_type} if o.jitter_by_type else {}),
                **o.header,
            }
            if o.schedule:
                header["schedule"] = scrub_text(o.schedule.to_toml())  # the script that runs it again
            where = o.record

            def failed(reason: str, lines: int) -> None:
                trace_write_failed(reason, lines, where)

            self.recorder = Recorder.open(o.record, header, o.clock, failed, buffered=True, tap=o.tap)
            self._flusher = asyncio.get_running_loop().create_task(self._flush_every())
        self._server = await serve(
            self._handler,
            o.host,
            o.port,
            process_request=self._process_request,
            process_response=self._process_response,
            select_subprotocol=self._select_subprotocol,
            max_size=o.max_frame_bytes,
            close_timeout=o.close_timeout,
            ssl=o.tls.context() if o.tls is not None else None,
            ping_interval=None,
            compression=None,
        )
        sock = next(iter(self._server.sockets))
        self.port = sock.getsockname()[1]

    async def stop(self, grace: float = 0.5) -> None:
        """Close every connection (1001) and stop; a peer that reads nothing (it cannot take a close frame) is
        dropped after `grace` seconds: within a second whatever the peers do."""
        if self._server is not None:
            self._server.close()
            try:
                await asyncio.wait_for(asyncio.shield(self._server.wait_closed()), grace)
            except asyncio.TimeoutError:
                for session in list(self.sessions):
                    session.ws.transport.abort()
                await self._server.wait_closed()
            self._server = None
        if self._flusher is not None:
            self._flusher.cancel()
            await asyncio.gather(self._flusher, return_exceptions=True)
            self._flusher = None
        if self.recorder is not None:
            self.recorder.close()


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


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


def options_from_cli(**given: Any) -> ServerOptions:
    """`ServerOptions` from command-line strings (durations in the grammar of `rtrace.core.durations`, event types
    checked against the catalog), by `ENDPOINT_OPTIONS`' fields; what is not given has its default. Raises
    ValueError with a message for people (TypeError for a name no option has)."""
    unknown = sorted(set(given) - set(OPTION_BY_FIELD))
    if unknown:
        raise TypeError(f"options_from_cli: no option {', '.join(unknown)}")
    v = {o.field: o.default for o in ENDPOINT_OPTIONS} | given
    cert, key = (os.fspath(v[k]) if v[k] is not None else None for k in ("cert", "key"))
    files = tls_files(bool(v["tls"]), cert, key, v["host"])
    default, by_type = parse_latencies(v["latency"] or [], "--latency")
    check_specs(list(by_type), "server", "--latency", "TYPE=DURATION")
    jitters = [v["jitter"]] if isinstance(v["jitter"], str) else list(v["jitter"] or [])
    jitter, jitter_by_type = parse_latencies(jitters, "--jitter")
    check_specs(list(jitter_by_type), "server", "--jitter", "TYPE=DURATION")
    # every other option read as it is declared, into the field of its name (`EndpointOption.read`, `.into`)
    read = {o.field: o.read(v[o.field]) if o.read is not None and v[o.field] is not None else v[o.field]
            for o in ENDPOINT_OPTIONS}  # fmt: skip
    into = {"endpoint": {}, "server": {}}  # type: dict[str, dict[str, Any]]
    for o in ENDPOINT_OPTIONS:
        for where in o.into if read[o.field] is not None else ():
            into[where][o.field] = read[o.field]
    endpoint = EndpointOptions(**into["endpoint"])
    if read["tool"] is not None:
        endpoint.tool, endpoint.tool_arguments = parse_tool(read["tool"])
    times = read["fault_times"]
    schedule = Schedule.of(Faults.given(v, read["close_code"], times or None))  # --fault-times 0: every time
    if read["script"] is not None:
        schedule = schedule + load_script(os.fspath(read["script"]))  # a ScriptError is a ValueError: file:line:
    return ServerOptions(**into["server"], latency=default, latency_by_type=by_type, jitter=jitter,
                         jitter_by_type=jitter_by_type, endpoint=endpoint, schedule=schedule, tls=files)


def describe(options: ServerOptions) -> list[str]:
    """What a server with `options` does to its clients, in words, for the start lines of `serve` and each latency
    of `sweep`: the latency (and per type), the jitter, and each fault in force."""
    o = options
    latency = f"latency {format_duration(o.latency)} on every server event" if o.latency else "no latency"
    if o.latency_by_type:
        latency += " (" + ", ".join(f"{k} {format_duration(v)}" for k, v in sorted(o.latency_by_type.items())) + ")"
    jitter = f"jitter +/-{format_duration(o.jitter)}" if o.jitter else ("jitter" if o.jitter_by_type else "no jitter")
    if o.jitter_by_type:
        jitter += " (" + ", ".join(f"{k} +/-{format_duration(v)}" for k, v in sorted(o.jitter_by_type.items())) + ")"
    jitter += " (order kept)" if o.jitter or o.jitter_by_type else ""
    lines = [f"{latency}, {jitter}"]
    lines.extend(o.schedule.describe())
    if o.from_trace is not None:
        lines.append(f"responses recorded in {o.from_trace}")
    return lines


def parse_tool(text: str) -> tuple[str, str | None]:
    """`--tool NAME` or `--tool NAME={"k": "v"}` -> (name, the arguments' JSON text or None). Raises ValueError."""
    name, sep, arguments = text.partition("=")
    name = name.strip()
    if not name:
        raise ValueError(f"--tool {text!r}: give a tool name, e.g. --tool lookup_order or --tool 'lookup_order={{}}'")
    if not sep:
        return name, None
    try:
        check_nesting(arguments, f"--tool {name}=...")  # before the json module, which recurses
        value = json.loads(arguments)
    except TooDeep:
        raise
    except ValueError as e:
        raise ValueError(f"--tool {name}=...: the arguments are not JSON ({e})") from None
    if not isinstance(value, dict):
        raise ValueError(f"--tool {name}=...: the arguments must be a JSON object, e.g. {{\"order_id\": \"42\"}}")
    return name, json.dumps(value, ensure_ascii=False)


__all__ = [
    "RealtimeServer",
    "ServerOptions",
    "describe",
    "options_from_cli",
    "run_server",
    "serve_forever",
]
