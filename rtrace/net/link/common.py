"""What the network modules share: the loopback names, URLs shown without secrets and mapped to an upstream,
running in the foreground until Ctrl-C or SIGTERM, the message of a trace that cannot be written any more, the
fresh directory of a hunt's or a sweep's outputs (`fresh_run_dir`), and the quiet after a fault that tells a hung
client, the fake endpoint's and the link's alike (`Quiet`).

Imports no other `rtrace.net` module, so `server`, `proxy`, `replay` and `sweep` never import each other for these.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import os
import signal
import sys
import time
import urllib.parse
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from ...core.escape import shown
from ...core.secrets import safe_path, scrub_text

#: Host names that only this machine can reach (`serve`, `record` warn when told to listen elsewhere).
LOOPBACK = ("127.0.0.1", "localhost", "::1")
#: Websocket frames up to this size are read (`serve` answers an event above its own limit with an error; `record`
#: forwards it).
MAX_FRAME_BYTES = 64 * 1024 * 1024
#: Upstream path suffixes the client's own path replaces (`--upstream wss://host/v1/realtime`).
_PATH_SUFFIXES = ("/v1/realtime", "/realtime", "/v1")


def check_out_dir(out: Path, option: str = "--out") -> None:
    """Raise ValueError (a message naming `option`) unless `out` is, or can be made, a writable directory."""
    if out.exists() and not out.is_dir():
        raise ValueError(f"{option} {out}: a file, not a directory (give a directory; it is made if missing)")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        why = "a part of it is a file" if e.errno in (errno.ENOTDIR, errno.EEXIST) else (e.strerror or str(e))
        raise ValueError(f"{option} {out}: cannot make the directory ({why})") from None
    if not os.access(out, os.W_OK | os.X_OK):
        raise ValueError(f"{option} {out}: cannot write there (permission denied)")


def fresh_run_dir(out: Path, option: str = "--out") -> Path:
    """A new directory `out/N` (N one more than the highest there) that no earlier hunt or sweep wrote into, made
    now (`out` too). Raises ValueError naming `option` when it cannot be made there."""
    check_out_dir(out, option)
    taken = [int(p.name) for p in out.iterdir() if p.name.isdigit()]
    n = max(taken, default=0) + 1
    for _ in range(1000):
        try:
            (out / str(n)).mkdir()
            return out / str(n)
        except FileExistsError:  # another one made it meanwhile
            n += 1
        except OSError as e:
            raise ValueError(f"{option} {out}: cannot make a directory in it ({e.strerror or e})") from None
    raise ValueError(f"{option} {out}: no free directory name in it")


#: Bytes a connection may hold unsent for a peer that does not read (pongs to its pings, events) before it is
#: closed (1008) and dropped: what a client can make `serve` or `record` hold stays bounded.
MAX_BACKLOG = 16 << 20
#: How often that is looked at (seconds).
BACKLOG_EVERY = 0.1


async def watch_backlog(ws: Any, told: Callable[[int], None], limit: int | None = None) -> None:
    """Until `ws` (a websockets connection) closes: when more than `limit` bytes (`MAX_BACKLOG`) wait unsent for its
    peer, tell `told` (the bytes held), close it 1008, and drop it if the close cannot go out within half a second
    (a peer that reads nothing takes no close frame either)."""
    transport = ws.transport
    bound = MAX_BACKLOG if limit is None else limit
    while not transport.is_closing():
        await asyncio.sleep(BACKLOG_EVERY)
        held = transport.get_write_buffer_size()
        if held > bound:
            told(held)
            closing = asyncio.ensure_future(ws.close(1008, "the peer reads nothing: too much held for it"))
            with contextlib.suppress(Exception):
                await asyncio.wait_for(asyncio.shield(closing), 0.5)
            transport.abort()
            closing.cancel()
            return


class _ScrubbingFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return shown(super().format(record), 4000).replace("\\x0a", "\n")


def scrubbed_logging(err: IO[str]) -> None:
    """Every log record of this process (websockets', asyncio's, tracebacks included) goes to `err` with secrets
    scrubbed (`core.secrets.scrub_text`) and control characters shown: an exception text may quote a URL with a
    key in it."""
    handler = logging.StreamHandler(err)
    handler.setFormatter(_ScrubbingFormatter("rtrace: %(name)s: %(message)s"))
    root = logging.getLogger()
    for old in [h for h in root.handlers if isinstance(h.formatter, _ScrubbingFormatter)]:
        root.removeHandler(old)
    root.addHandler(handler)
    if root.level > logging.WARNING or root.level == logging.NOTSET:
        root.setLevel(logging.WARNING)


def host_for_url(host: str) -> str:
    """`host` as it stands in a URL: an IPv6 address in brackets."""
    return f"[{host}]" if ":" in host else host


def safe_url(url: str) -> str:
    """`url` fit to print: no user or password, and no secret query parameter (`safe_path`); never raises."""
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:  # not a URL at all (an unclosed IPv6 bracket): shown scrubbed
        return scrub_text(url)
    netloc = host_for_url(parts.hostname or "")
    with contextlib.suppress(ValueError):  # an invalid port is left out
        if parts.port:
            netloc += f":{parts.port}"
    return urllib.parse.urlunsplit((parts.scheme, netloc, safe_path(parts.path + "?" + parts.query), "", ""))


def websocket_url(url: str) -> str:
    """`url` as a websocket URL: `http://` is `ws://` and `https://` is `wss://` (the `OPENAI_BASE_URL` that `serve`
    and `record` print is an http one); any other URL unchanged."""
    scheme, sep, rest = url.partition("://")
    mapped = {"http": "ws", "https": "wss"}.get(scheme.lower()) if sep else None
    return f"{mapped}://{rest}" if mapped else url


def check_ws_url(url: str, option: str) -> str:
    """`url` if a websocket connection can be made to it and to any client path below it (`upstream_url`): a ws://
    or wss:// URL with a host, a valid port, no fragment, no space, and no user name or password (credentials travel
    in headers, never in a URL that a log or an error message may show). Raises ValueError, its text scrubbed."""
    from websockets.exceptions import InvalidURI
    from websockets.uri import parse_uri

    quoted = shown(url, 200)
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError as e:
        raise ValueError(f"{option} is not a usable websocket URL ({e}): {quoted!r}") from None
    if parts.scheme not in ("ws", "wss") or not parts.netloc:
        raise ValueError(f"{option} must be a ws:// or wss:// URL, not {quoted!r}")
    if "@" in parts.netloc:
        raise ValueError(
            f"{option} must not hold a user name or password (credentials go in headers): "
            + repr(shown(safe_url(url), 200))
        )
    if any(ch.isspace() or not ch.isprintable() for ch in url):
        raise ValueError(f"{option} has a space or a control character in it: {quoted!r}")
    if parts.fragment or url.endswith("#"):
        raise ValueError(f"{option} must not have a #fragment: {quoted!r}")
    try:
        parse_uri(upstream_url(url, "/v1/realtime?model=m"))
    except (InvalidURI, ValueError) as e:
        why = str(e).rsplit(": ", 1)[-1] if isinstance(e, InvalidURI) else str(e)
        raise ValueError(f"{option} is not a usable websocket URL ({scrub_text(why)}): {quoted!r}") from None
    return url


def is_loopback(url: str) -> bool:
    """Whether `url`'s host is this machine: `localhost`, or a loopback address (127.0.0.0/8, ::1); a name that
    only starts like one (`127.0.0.1.example`) is not."""
    import ipaddress

    try:
        host = urllib.parse.urlsplit(url).hostname or ""
    except ValueError:
        return False
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def upstream_url(upstream: str, client_path: str) -> str:
    """Where a client request for `client_path` goes: the upstream's origin (and any prefix before `/v1/realtime`,
    unless the client's path starts with it) plus the client's path and query; query parameters of `upstream` the
    client did not set are added."""
    up = urllib.parse.urlsplit(upstream)
    prefix = up.path.rstrip("/")
    for suffix in _PATH_SUFFIXES:
        if prefix.endswith(suffix):
            prefix = prefix[: -len(suffix)]
            break
    cp = urllib.parse.urlsplit(client_path)
    if prefix and (cp.path == prefix or cp.path.startswith(prefix + "/")):
        prefix = ""  # a client that asks for the vendor's own path (`/openai/...`, `/voice-live/...`) already has it
    query = urllib.parse.parse_qsl(cp.query, keep_blank_values=True)
    have = {k for k, _ in query}
    query += [(k, v) for k, v in urllib.parse.parse_qsl(up.query, keep_blank_values=True) if k not in have]
    return urllib.parse.urlunsplit((up.scheme, up.netloc, prefix + cp.path, urllib.parse.urlencode(query), ""))


def trace_write_failed(reason: str, lines: int, path: str | os.PathLike[str] | None = None) -> None:
    """The recorders' `TraceWriter.on_failure`: the user is told once, on stderr, when and where the trace stops
    (`path`, when given); the sessions go on, and so does the log."""
    import time

    where = f" {shown(os.fspath(path))}" if path is not None else ""
    print(
        f"rtrace: {time.strftime('%H:%M:%S')}: cannot write the trace{where} any more ({reason}); frames keep passing,"
        f" the trace stops after line {lines}",
        file=sys.stderr,
        flush=True,
    )


class Quiet:
    """What a hunt ends a run early by, from every record of the run's trace as it is written (`saw`): when client
    or server last did anything, when a fault last acted, and whether a response was done since."""

    def __init__(self) -> None:
        self.activity = time.monotonic()
        self.fault_at: float | None = None
        self.done_since_fault = False

    def saw(self, direction: str, event: dict[str, Any]) -> None:
        self.activity = time.monotonic()
        kind = event.get("type")
        if kind == "fault.injected":
            self.fault_at, self.done_since_fault = self.activity, False
        elif kind == "response.done" and direction == "server":
            self.done_since_fault = True

    def hung(self, quiet: float, connected: bool) -> bool:
        """Whether a fault acted, no response was done since, a connection is open (`connected`: the new one, or
        the one a fault did not close) and nothing went either way for `quiet` seconds: the client hangs on the
        turn the fault broke. A client with no connection open is between connections - backing off before it
        reconnects, or gone - and is left to its deadline."""
        return (self.fault_at is not None and not self.done_since_fault and connected
                and time.monotonic() - self.activity >= quiet)  # fmt: skip


async def until_stopped() -> None:
    """Return on Ctrl-C, SIGTERM or SIGHUP (or when cancelled): how `serve` and `record` run in the foreground (the
    trace then closed whole)."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)
    await stop.wait()


__all__ = [
    "LOOPBACK",
    "MAX_BACKLOG",
    "MAX_FRAME_BYTES",
    "Quiet",
    "check_out_dir",
    "check_ws_url",
    "fresh_run_dir",
    "host_for_url",
    "is_loopback",
    "safe_url",
    "scrubbed_logging",
    "trace_write_failed",
    "until_stopped",
    "upstream_url",
    "watch_backlog",
    "websocket_url",
]
