"""`rtrace replay`: send the client side of a recorded trace again, connection by connection; record the answers.

It re-sends the client's recorded decisions: it shows how an endpoint answers them (acks, errors, what the fake or
another endpoint does differently), never what the client would have decided at another latency (that is `serve` or
`sweep` with the real client). What to send when, the ids learned and the divergences are the sans-I/O
`rtrace.net.replay.session.ReplaySession` (pacing and its causality are described there); this layer only moves its
frames and its time: it connects, writes every frame to the replayed trace, sleeps until the session's next moment,
and runs the in-process fake, whose clock runs `speed` times as fast (its latency and recorded pacing scale with the
replay's pauses, so the conversation keeps its shape at any speed).

Owns the connections, the replayed trace, the in-process fake, `--compare` and the side-by-side findings. It does not
judge the conversation itself (that is `rtrace.engine.fold`, run on both traces), and a key for a real endpoint comes
from the environment only when asked (`api_key_env`), never over ws:// to another machine, and is never written.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import tempfile
import time
import urllib.parse
from collections.abc import AsyncIterator, Callable
from typing import IO, Any

import orjson
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus, WebSocketException

from ... import __version__
from ...core.escape import shown
from ...core.loader import TraceReader, UnreadableInput
from ...core.secrets import redact_event, safe_path
from ...core.trace import Record
from ...core.writer import TraceWriter
from ...engine.fold import TraceReport, analyze_path
from ...rules.base import Config
from ..link.common import is_loopback, safe_url, trace_write_failed, upstream_url
from .session import (
    PACES,
    ConnResult,
    Divergence,
    Done,
    ReplaySession,
    Send,
    client_ids,
    server_event,
)


class ReplayFailed(Exception):
    """The endpoint could not be reached (or refused the handshake): nothing was replayed (exit 4)."""


@dataclasses.dataclass
class ReplayOptions:
    #: `fake` (an in-process `rtrace serve`) or a ws:// / wss:// URL.
    target: str = "fake"
    pace: str = "reactive"
    speed: float = 1.0
    #: Seconds each wait for an answer may take.
    timeout: float = 5.0
    #: Latency of the in-process fake (None: the trace header's, else 50 ms).
    latency: float | None = None
    latency_by_type: dict[str, float] = dataclasses.field(default_factory=dict)
    #: The fake answers `response.create` with the recorded responses (in order) rather than its own.
    recorded_responses: bool = True
    output: str | os.PathLike[str] | None = None
    #: Only the first N connections.
    max_conns: int | None = None
    #: Send the key held by this environment variable (`Authorization: Bearer`) to a real endpoint; none is sent
    #: unless asked, never to the in-process fake, and never over ws:// to a host other than this machine.
    api_key_env: str | None = None
    #: Told, once per endpoint, where a key went (the key itself scrubbed): the CLI prints it.
    on_key: Callable[[str], None] | None = None


@dataclasses.dataclass
class ReplayResult:
    original: str
    replayed: str
    target: str
    conns: list[ConnResult]
    divergences: list[Divergence]
    original_report: TraceReport | None = None
    replay_report: TraceReport | None = None
    #: Per connection, the server event types received (ids left out): for `--compare`.
    answers: dict[int, list[str]] = dataclasses.field(default_factory=dict)
    #: What became of the faults the recording's header holds (its `schedule`, as `serve` and `hunt` write it):
    #: injected by the fake, or why not. "" when it holds none.
    faults: str = ""


# -- one connection -------------------------------------------------------------------------------------------------


async def _run(ws: ClientConnection, session: ReplaySession, writer: TraceWriter) -> None:
    """Move the frames and the time of one connection's `session`: each server frame to the trace and the session,
    each `Send` to the socket and the trace, each `Wait` until a frame comes or its time."""
    arrived = asyncio.Event()

    async def receive() -> None:
        try:
            async for message in ws:
                event = server_event(message)
                if event is None:
                    continue
                writer.write("server", session.conn, event)  # redacted by the writer
                session.receive(event, writer.lines)
                arrived.set()
        except ConnectionClosed:
            pass
        finally:
            session.closed()
            arrived.set()

    receiver = asyncio.create_task(receive())
    try:
        while not isinstance(action := session.next(), Done):
            if isinstance(action, Send):
                try:
                    await ws.send(orjson.dumps(action.event).decode())
                except ConnectionClosed:
                    session.closed()
                    continue
                writer.write("client", session.conn, action.event)
                session.sent(writer.lines)
                continue
            arrived.clear()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(arrived.wait(), max(0.0, action.until - time.monotonic()))
    finally:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(ws.close(), 2.0)
        receiver.cancel()
        await asyncio.gather(receiver, return_exceptions=True)
        session.result.close_code = ws.close_code


# -- the whole trace ------------------------------------------------------------------------------------------------


def read_trace(path: str | os.PathLike[str]) -> tuple[dict[int, list[Record]], dict[int, str], dict[str, Any]]:
    """Records by connection (in order of first appearance), each connection's recorded path, the header."""
    by_conn: dict[int, list[Record]] = {}
    paths: dict[int, str] = {}
    with TraceReader.open(path) as reader:
        for rec in reader:
            by_conn.setdefault(rec.conn, []).append(rec)
            if rec.dir == "meta" and rec.type == "connection.opened" and isinstance(rec.event.get("path"), str):
                paths.setdefault(rec.conn, rec.event["path"])
        header = dict(reader.header.fields) if reader.header is not None else {}
    if reader.unusable is not None:
        raise UnreadableInput(f"{os.fspath(path)}: {reader.unusable}")
    return by_conn, paths, header


def check_key_target(target: str, env: str | None) -> None:
    """Raise ValueError when a key asked for (`env`) would go where it must not: missing, or over ws:// to a host
    other than this machine (anyone on the way could read it)."""
    if env is None or target == "fake":
        return
    if not os.environ.get(env):
        raise ValueError(f"--api-key-env {env}: no such variable in the environment (or it is empty)")
    if urllib.parse.urlsplit(target).scheme != "wss" and not is_loopback(target):
        raise ValueError(
            f"--api-key-env: the key would cross the network unencrypted to {safe_url(target)}; use a wss:// URL"
        )


def _headers_for(target: str, options: ReplayOptions) -> list[tuple[str, str]]:
    env = options.api_key_env
    if env is None:
        return []
    try:
        check_key_target(target, env)
    except ValueError as e:
        raise ReplayFailed(str(e)) from None
    key = os.environ[env]
    if options.on_key is not None:
        where = safe_url(target)
        options.on_key(f"the key in ${env} ({len(key)} characters) goes to {where} in the Authorization header")
    return [("Authorization", f"Bearer {key}")]


def _writer(target: str, out: str | os.PathLike[str] | IO[bytes]) -> TraceWriter:
    header = {"recorder": "rtrace replay", "version": __version__, "target": safe_url(target)}
    if isinstance(out, (str, os.PathLike)):
        return TraceWriter.open(out, header, time.monotonic, trace_write_failed, redact_event)
    return TraceWriter(out, header, time.monotonic, trace_write_failed, redact_event)


async def replay_to(
    target: str,
    by_conn: dict[int, list[Record]],
    paths: dict[int, str],
    options: ReplayOptions,
    out: str | os.PathLike[str] | IO[bytes],
) -> ReplayResult:
    """Replay against a websocket base URL, writing the replayed trace to `out` (a file object, or a path whose
    file appears with the first connection made: an endpoint that cannot be reached leaves it as it was)."""
    headers = _headers_for(target, options) if options.target != "fake" else []
    writer = _writer(target, out)
    try:
        return await _replay_conns(target, headers, by_conn, paths, options, writer)
    finally:
        writer.close()


async def _replay_conns(
    target: str,
    headers: list[tuple[str, str]],
    by_conn: dict[int, list[Record]],
    paths: dict[int, str],
    options: ReplayOptions,
    writer: TraceWriter,
) -> ReplayResult:
    ids: dict[str, str] = {}
    keep = client_ids([r for recs in by_conn.values() for r in recs])
    conns: list[ConnResult] = []
    divergences: list[Divergence] = []
    answers: dict[int, list[str]] = {}
    for n, conn in enumerate(list(by_conn)[: options.max_conns], 1):
        records = by_conn[conn]
        path = paths.get(conn, "/v1/realtime?model=gpt-realtime")
        url = upstream_url(target, path)
        try:
            ws = await connect(
                url,
                additional_headers=headers,
                subprotocols=["realtime"],  # type: ignore[list-item]
                open_timeout=options.timeout,
                max_size=None,
                ping_interval=None,
                proxy=None,
            )
        except InvalidStatus as e:
            status = e.response.status_code
            hint = " (no key was sent: --api-key-env NAME sends one)" if status in (401, 403) and not headers else ""
            raise ReplayFailed(f"{safe_url(url)}: the endpoint refused: HTTP {status}{hint}") from None
        except (OSError, InvalidHandshake, asyncio.TimeoutError) as e:
            raise ReplayFailed(f"{safe_url(url)}: cannot connect: {shown(str(e))}") from None
        except WebSocketException as e:  # an invalid URL (InvalidURI quotes it whole): scrubbed, never raised on
            raise ReplayFailed(f"{safe_url(url)}: cannot connect: {shown(str(e))}") from None
        writer.write("meta", n, {"type": "connection.opened", "path": safe_path(path)})
        session = ReplaySession(
            n, records, clock=time.monotonic, pace=options.pace, speed=options.speed, timeout=options.timeout,
            ids=ids, keep=keep, line=writer.lines,
        )  # fmt: skip
        await _run(ws, session, writer)
        closed: dict[str, Any] = {"type": "connection.closed", "by": "client"}
        if session.result.close_code is not None:
            closed["code"] = session.result.close_code
        writer.write("meta", n, closed)
        conns.append(session.result)
        divergences.extend(session.divergences)
        answers[n] = session.answers
    return ReplayResult("", "", safe_url(target), conns, divergences, answers=answers)


@contextlib.asynccontextmanager
async def _target(options: ReplayOptions, trace: str, header: dict[str, Any]) -> AsyncIterator[str]:
    if options.target != "fake":
        yield options.target
        return
    from ..link.server import ServerOptions, run_server

    latency = options.latency
    if latency is None:
        latency = float(header["latency"]) if isinstance(header.get("latency"), (int, float)) else 0.05
    speed = max(options.speed, 1e-6)

    def clock() -> float:  # the fake's time runs `speed` times as fast: its latency and recorded pacing scale
        return time.monotonic() * speed

    def sleep(seconds: float) -> Any:
        return asyncio.sleep(seconds / speed)

    by_type = dict(options.latency_by_type)
    if not by_type and options.latency is None and isinstance(header.get("latency_by_type"), dict):
        by_type = {str(k): float(v) for k, v in header["latency_by_type"].items() if isinstance(v, (int, float))}
    server_options = ServerOptions(
        latency=latency,
        latency_by_type=by_type,
        from_trace=trace if options.recorded_responses else None,
        clock=clock,
        sleep=sleep,
        schedule=recorded_faults(trace, header),
    )
    async with run_server(server_options) as srv:
        yield srv.url


def recorded_faults(trace: str, header: dict[str, Any]) -> Any:
    """The faults a recording's header holds (`schedule`: the script `serve` ran, a hunt's faults among its turns),
    as the fake's schedule: a replay against the fake injects them where the recording had them. Raises
    `ReplayFailed` when the header's schedule cannot be read (the replay would not be the recording's)."""
    from ..faults.script import Schedule, ScriptError, parse_script

    text = header.get("schedule")
    if not isinstance(text, str) or not text.strip():
        return Schedule()
    try:
        return parse_script(text, f"{trace}: the header's schedule")
    except (ScriptError, ValueError) as e:
        raise ReplayFailed(f"cannot inject the recording's faults: {e}") from None


def faults_note(header: dict[str, Any], target: str) -> str:
    """What a replay says of the faults a recording's header holds."""
    text = header.get("schedule")
    if not isinstance(text, str) or not text.strip():
        return ""
    turns = text.count("[[turn]]")
    if target != "fake":
        return (f"the recording's {turns} fault turn(s) are not injected: {safe_url(target)} is not rtrace's fake "
                "(replay against --target fake to have them)")  # fmt: skip
    return f"the recording's {turns} fault turn(s) injected by the fake, where the recording had them"


async def replay_async(path: str, options: ReplayOptions, out: str | os.PathLike[str] | IO[bytes]) -> ReplayResult:
    by_conn, paths, header = read_trace(path)
    if not any(r.dir == "client" for recs in by_conn.values() for r in recs):
        raise ReplayFailed(f"{path}: no client event to replay")
    async with _target(options, path, header) as url:
        result = await replay_to(url, by_conn, paths, options, out)
    if options.target == "fake":
        result.target = "fake (rtrace serve)"
    result.faults = faults_note(header, options.target)
    return result


def replay(path: str, options: ReplayOptions, config: Config | None = None) -> ReplayResult:
    """Replay `path` and analyze both traces. The replayed trace goes to `options.output` (else a temp file)."""
    if options.pace not in PACES:
        raise ValueError(f"--pace must be one of {', '.join(PACES)}")
    config = config or Config()
    tmp = None
    if options.output is None:
        fd, tmp = tempfile.mkstemp(prefix="rtrace-replay-", suffix=".jsonl")
        os.close(fd)
    out_path = os.fspath(options.output) if options.output is not None else str(tmp)
    try:
        result = asyncio.run(replay_async(path, options, out_path))
        result.original, result.replayed = path, out_path if tmp is None else "(not kept)"
        result.original_report = analyze_path(path, config)
        result.replay_report = analyze_path(out_path, config)
        return result
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def compare(path: str, options: ReplayOptions, url: str) -> tuple[ReplayResult, ReplayResult, list[str]]:
    """Replay against the fake and against `url`; the differences in what each answered, per connection."""
    import difflib

    fake = replay(path, dataclasses.replace(options, target="fake", output=None))
    real = replay(path, dataclasses.replace(options, target=url, output=None))
    lines: list[str] = []
    for conn in sorted(set(fake.answers) | set(real.answers)):
        diff = difflib.unified_diff(
            real.answers.get(conn, []),
            fake.answers.get(conn, []),
            f"conn {conn} {real.target}",
            f"conn {conn} fake",
            n=1,
            lineterm="",
        )
        lines.extend(diff)
    return fake, real, lines


__all__ = [
    "ReplayFailed",
    "ReplayOptions",
    "ReplayResult",
    "compare",
    "replay",
]
