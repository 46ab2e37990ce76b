"""The hardening tally of issue 16: rtrace attacked class by class, as a hostile user and a careless one would, and
every case counted (`make harden`; minutes; not part of `make test`).

Each class tries many cases and counts those rtrace held (the expected exit code, the input intact, no secret, no
raw control character, an answer in time) and those it did not. Every command runs in its own process with a
timeout: a hang is a failed case, and so is a traceback anywhere. Prints the table the closing note quotes, writes
`bench/out/harden.json`, and exits 1 when a case failed.

    .venv/bin/python -m bench.harden              # every class
    .venv/bin/python -m bench.harden --only 4,7   # some classes
    .venv/bin/python -m bench.harden --quick      # a sample of each (seconds, for a try)
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import io
import itertools
import os
import random
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson

from rtrace.core.loader import TraceReader
from tests import side_inputs
from tests.catalog_trace import CATALOG_LINES, WRONG, dumps_lines, field_paths, get_path, kind_of, mutated
from tests.hostile_trace import outside_code
from tests.secret_corpus import (
    PLANTS,
    Plant,
    corpus_lines,
    keyed_session,
    responses_lines,
    stream_plants,
    survivors,
)

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench" / "out" / "harden.json"
RTRACE = [sys.executable, "-m", "rtrace.cli"]
KEY = "sk-proj-HARDENTALLYkey0123456789abcdefghijkl"
SAMPLES = sorted((ROOT / "sample_traces").rglob("*.jsonl"))
SAMPLE = ROOT / "sample_traces" / "real" / "tool-output-race.livekit-1.8.8.jsonl"
#: Raw characters a terminal acts on: C0 (but tab and newline), DEL, C1 (UTF-8), line separators, bidi controls.
RAW_CONTROL = re.compile(rb"[\x00-\x08\x0b-\x1f\x7f]|\xc2[\x80-\x9f]|\xe2\x80[\xa8-\xae]|\xe2\x81[\xa6-\xa9]")

CLASSES = {
    1: "proxy and upstream URLs: no key printed, every connection closed",
    2: "one bad field never discards a trace",
    3: "no command destroys its input",
    4: "planted secrets (0 may survive)",
    5: "replay sends a key only when asked",
    6: "terminal and HTML injection in paths and trace text",
    7: "special files and endless lines: no hang",
    8: "signals, floods, parallel clients, --host, bidi",
    9: "side inputs nested too deep: file:line:col, exit 2",
    10: "a script's regular expressions: checked, time-bounded",
    11: "special and endless files as side inputs",
    12: "LiveKit logs past a preamble, UTF-16, BOM",
    13: "compressed streams: cut anywhere, read in linear time",
}


@dataclasses.dataclass
class Tally:
    tried: dict[int, int] = dataclasses.field(default_factory=dict)
    failed: dict[int, list[str]] = dataclasses.field(default_factory=dict)
    tracebacks: int = 0
    hangs: int = 0
    secrets: int = 0

    def case(self, cls: int, ok: bool, what: str) -> bool:
        self.tried[cls] = self.tried.get(cls, 0) + 1
        if not ok:
            self.failed.setdefault(cls, []).append(what)
        return ok


TALLY = Tally()


def run(args: list[str], cwd: Path, timeout: float = 60, **kw: Any) -> subprocess.CompletedProcess[bytes] | None:
    """`rtrace ARGS` in its own process; None (a hang, counted) when it outlives `timeout`."""
    try:
        return subprocess.run([*RTRACE, *args], capture_output=True, timeout=timeout, cwd=cwd, **kw)
    except subprocess.TimeoutExpired:
        TALLY.hangs += 1
        return None


def clean(proc: subprocess.CompletedProcess[bytes] | None) -> bool:
    """Answered in time, without a traceback or an internal error."""
    if proc is None:
        return False
    if b"Traceback" in proc.stderr or b"internal error" in proc.stderr:
        TALLY.tracebacks += 1
        return False
    return True


# -- 1. proxy and upstream URLs -------------------------------------------------------------------------------------


def upstream_urls() -> Iterator[str]:
    """URLs `--upstream` must refuse at start: credentials in every spelling, bad ports and hosts, fragments."""
    hosts = ["127.0.0.1:9", "[::1]:9", "api.example", "localhost:8080"]
    for scheme, host in itertools.product(("ws", "wss"), hosts):
        base = f"{scheme}://{{}}{host}/v1/realtime"
        for userinfo in ("user@", f"{KEY}@", f"user:{KEY}@", f":{KEY}@", "user:@", "%75ser@", f"u%3A{KEY}@"):
            for query in ("", f"?api-key={KEY}", "?model=m"):
                yield base.format(userinfo) + query
    yield from (
        "ws://127.0.0.1:99999/v1",
        "ws://127.0.0.1:-1/v1",
        "ws://127.0.0.1:port/v1",
        "ws://[::1/v1",
        "ws:///v1",
        "ws://127.0.0.1:9/v1#x",
        "ws://127.0.0.1:9/v1#",
        "ws://127.0.0.1:9/v 1",
        "ws://127.0.0.1:9/v1\x1b[31m",
        "http://127.0.0.1:9/v1",
        "ftp://h/",
        "ws:/h/v1",
        "ws//h",
        "",
        " ",
        "wss://",
        f"ws://h/v1?\n{KEY}",
    )


def class_1(quick: bool, tmp: Path) -> None:
    from rtrace.net.link.proxy import check_upstream

    urls = list(upstream_urls())
    for k, url in enumerate(urls):
        try:
            check_upstream(url)
            ok = False
        except ValueError as e:
            ok = KEY not in str(e) and KEY[8:30] not in str(e)
        TALLY.case(1, ok, f"check_upstream accepted or leaked: {url!r}")
        if quick and k > 10:
            break
    for url in urls[:: 1 if not quick else 40][:30]:
        proc = run(["record", "--upstream", url, "-o", str(tmp / "rec.jsonl")], tmp, timeout=20)
        ok = clean(proc) and proc is not None and proc.returncode == 2 and KEY.encode() not in proc.stderr + proc.stdout
        TALLY.case(1, ok and not (tmp / "rec.jsonl").exists(), f"record --upstream {url!r}")
    asyncio.run(_upstream_failures(tmp, 3 if quick else 24))


async def _upstream_failures(tmp: Path, n: int) -> None:
    """Through a live proxy, `connect` raising each kind of error with the key in its text."""
    import logging

    from websockets.asyncio.client import connect
    from websockets.exceptions import InvalidHandshake, InvalidStatus, InvalidURI

    from rtrace.net.link import proxy as proxy_module
    from rtrace.net.link.common import scrubbed_logging
    from rtrace.net.link.proxy import RecordOptions, run_proxy

    errors: list[Exception] = [
        InvalidURI(f"ws://u@h/v1?api-key={KEY}", "username provided without password"),
        RuntimeError(KEY),
        ValueError(f"wss://u:{KEY}@h"),
        OSError(111, f"refused {KEY}"),
        InvalidHandshake(f"bad {KEY}"),
        TimeoutError(KEY),
        KeyError(KEY),
        UnicodeError(KEY),
    ]
    log = io.StringIO()
    root = logging.getLogger()
    saved = list(root.handlers)
    root.handlers = []
    scrubbed_logging(log)
    original = proxy_module.connect
    try:
        for k in range(n):
            error = errors[k % len(errors)]

            async def failing(*args: Any, error: Exception = error, **kw: Any) -> Any:
                raise error

            proxy_module.connect = failing  # type: ignore[assignment]
            trace = tmp / f"fail{k}.jsonl"
            async with run_proxy(RecordOptions(upstream="ws://127.0.0.1:9/v1", output=trace)) as proxy:
                status = 0
                try:
                    await connect(f"{proxy.url}/realtime?model=m&api-key={KEY}", open_timeout=5)
                except InvalidStatus as e:
                    status = e.response.status_code
                    body = e.response.body or b""
            with TraceReader.open(trace) as reader:
                types = [(r.conn, r.type) for r in reader]
            data = trace.read_bytes()
            ok = (
                status == 502
                and KEY.encode() not in body + data
                and types
                == [
                    (1, "connection.opened"),
                    (1, "note"),
                    (1, "connection.closed"),
                ]
            )
            TALLY.case(1, ok, f"upstream failure {type(error).__name__}: status {status}, {types}")
    finally:
        proxy_module.connect = original  # type: ignore[assignment]
        root.handlers = saved
    TALLY.case(1, KEY not in log.getvalue() and KEY[8:30] not in log.getvalue(), "a key reached the log")


# -- 2. one bad field -------------------------------------------------------------------------------------------------


def _wrong_fields(lines: list[dict[str, Any]], every: int) -> Iterator[tuple[int, tuple[Any, ...], Any]]:
    n = 0
    for index, line in enumerate(lines):
        event = line.get("event") if isinstance(line, dict) else None
        if not isinstance(event, dict):
            continue
        for path in field_paths(event):
            wrongs = WRONG[kind_of(get_path(event, path))]
            for k, wrong in enumerate(wrongs):
                n += 1
                if every == 0 and k:
                    continue  # one wrong kind per field, in turn
                if every and n % every:
                    continue
                yield index, path, wrong


def class_2(quick: bool, tmp: Path) -> None:
    from rtrace.engine.fold import Report, analyze_reader
    from rtrace.report.outputs import ReportFormat, render_bytes
    from rtrace.rules.base import Config

    def check(lines: list[dict[str, Any]], name: str, render: bool) -> None:
        data = dumps_lines(lines)
        try:
            report = analyze_reader(TraceReader(io.BytesIO(data), name))
            if render:
                for fmt in ReportFormat:
                    render_bytes(Report([report], Config()), fmt)
        except Exception as e:
            TALLY.tracebacks += 1
            TALLY.case(2, False, f"{name}: {type(e).__name__}: {e}")
            return
        count = sum(1 for x in lines if isinstance(x, dict) and "event" in x)
        ok = report.unreadable is None and not report.failed_rules and report.events == count
        TALLY.case(2, ok, f"{name}: unreadable={report.unreadable} failed={report.failed_rules}")

    every = 40 if quick else 1
    for k, (index, path, wrong) in enumerate(_wrong_fields(CATALOG_LINES, every)):
        check(mutated(CATALOG_LINES, index, path, wrong), f"catalog line {index + 1} {path}={wrong!r}", k % 97 == 0)
    for sample in SAMPLES[:: 8 if quick else 1]:
        lines = [orjson.loads(x) for x in sample.read_bytes().splitlines() if x.strip()]
        events = [x for x in lines if isinstance(x, dict) and isinstance(x.get("event"), dict)]
        for k, (index, path, wrong) in enumerate(_wrong_fields(events, 50 if quick else 1)):
            check(mutated(events, index, path, wrong), f"{sample.name} line {index + 1} {path}={wrong!r}", k % 199 == 0)
    # Through the CLI: analyze and report, whole process, on a few.
    for index, path, wrong in list(_wrong_fields(CATALOG_LINES, 0))[:: 200 if quick else 25]:
        trace = tmp / "bad-field.jsonl"
        trace.write_bytes(dumps_lines(mutated(CATALOG_LINES, index, path, wrong)))
        for args in (["analyze", str(trace)], ["report", str(trace)]):
            proc = run(args, tmp)
            ok = clean(proc) and proc is not None and proc.returncode in (0, 1) and b"nreadable" not in proc.stdout
            TALLY.case(2, ok, f"{args[0]} with {path}={wrong!r}: {proc and proc.returncode}")


# -- 3. no command destroys its input ---------------------------------------------------------------------------------

SAME_AS_INPUT = [
    ["convert", "I", "-o", "O"],
    ["replay", "I", "-o", "O", "--timeout", "1s"],
    ["redact", "I", "-o", "O"],
    ["analyze", "I", "-o", "O"],
    ["analyze", "I", "--json", "O"],
    ["analyze", "I", "--html", "O"],
    ["analyze", "I", "--markdown", "O"],
    ["analyze", "I", "--sarif", "O"],
    ["analyze", "I", "--junit", "O"],
    ["report", "I", "-o", "O", "-f", "markdown"],
    ["serve", "--from", "I", "--record", "O"],
]


def class_3(quick: bool, tmp: Path) -> None:
    folder = tmp / "d"
    folder.mkdir()
    trace = folder / "x.jsonl"
    original = SAMPLE.read_bytes()
    (tmp / "link.jsonl").symlink_to(trace)
    spellings = {
        "same": lambda: str(trace),
        "relative": lambda: os.path.relpath(trace, tmp),
        "dot": lambda: str(folder / "." / "x.jsonl"),
        "dotdot": lambda: str(folder / ".." / "d" / "x.jsonl"),
        "symlink": lambda: str(tmp / "link.jsonl"),
        "hardlink": lambda: _hardlink(trace, folder / "hard.jsonl"),
    }
    for args, (how, spell) in itertools.product(SAME_AS_INPUT[:: 3 if quick else 1], spellings.items()):
        trace.write_bytes(original)
        out = spell()
        proc = run([str(trace) if a == "I" else out if a == "O" else a for a in args], tmp)
        ok = clean(proc) and proc is not None and proc.returncode == 2 and trace.read_bytes() == original
        ok = ok and not [p for p in folder.iterdir() if p.name.startswith(".")]
        TALLY.case(3, ok, f"{args[0]} {' '.join(args[1:])} ({how}): {proc and proc.returncode}")
    # An existing output is replaced only when the command produced something.
    empty = tmp / "empty.jsonl"
    empty.write_bytes(b"")
    binary = tmp / "binary.jsonl"
    binary.write_bytes(bytes(range(256)) * 4)
    for command, source in itertools.product(("convert", "redact"), (empty, tmp / "missing.jsonl", tmp / "d")):
        out = tmp / "kept.jsonl"
        out.write_bytes(b"an earlier result\n")
        proc = run([command, str(source), "-o", str(out)], tmp)
        ok = clean(proc) and proc is not None and proc.returncode == 3 and out.read_bytes() == b"an earlier result\n"
        TALLY.case(3, ok, f"{command} {source.name} over an existing output: {proc and proc.returncode}")
    for command in ("record", "serve"):
        kept = tmp / f"{command}.jsonl"
        kept.write_bytes(original)
        ok = _recorder_stopped_idle(command, kept, tmp) and kept.read_bytes() == original
        TALLY.case(3, ok, f"{command} that recorded nothing kept the existing trace")
    for sig in (signal.SIGKILL, signal.SIGTERM, signal.SIGINT):
        TALLY.case(3, asyncio.run(_killed_recorder(tmp, sig)), f"record killed with {sig.name}: trace not parseable")


def _hardlink(src: Path, dst: Path) -> str:
    with contextlib.suppress(FileNotFoundError):
        dst.unlink()
    os.link(src, dst)
    return str(dst)


def _recorder_stopped_idle(command: str, trace: Path, tmp: Path) -> bool:
    args = ["record", "--upstream", "ws://127.0.0.1:9/v1", "-o"] if command == "record" else ["serve", "--record"]
    proc = subprocess.Popen([*RTRACE, *args, str(trace)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp)
    try:
        assert proc.stdout is not None
        proc.stdout.readline()
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            _, err = proc.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            TALLY.hangs += 1
            return False
    return proc.returncode == 0 and b"Traceback" not in err


@contextlib.asynccontextmanager
async def _recorder(upstream: str, trace: Path) -> Any:
    proc = await asyncio.create_subprocess_exec(
        *RTRACE, "record", "--upstream", upstream, "-o", str(trace), stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert proc.stdout is not None
    line = (await asyncio.wait_for(proc.stdout.readline(), 20)).decode()
    found = re.search(r"(ws://\S+/v1)", line)
    try:
        yield proc, found.group(1) if found else ""
    finally:
        if proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await proc.wait()


async def _killed_recorder(tmp: Path, sig: signal.Signals) -> bool:
    from websockets.asyncio.client import connect

    from rtrace.net.link.server import ServerOptions, run_server

    trace = tmp / f"killed-{sig.name}.jsonl"
    async with run_server(ServerOptions()) as srv, _recorder(srv.url, trace) as (proc, url):
        async with connect(f"{url}/realtime?model=m") as ws:
            await ws.recv()
            for k in range(20):
                await ws.send(orjson.dumps({"type": "conversation.item.create", "item": _item(f"i{k}")}).decode())
            await asyncio.sleep(0.3)
            proc.send_signal(sig)
            with contextlib.suppress(Exception):
                async for _ in ws:
                    pass
        await asyncio.wait_for(proc.wait(), 15)
    with TraceReader.open(trace) as reader:
        records = list(reader)
    creates = sum(1 for r in records if r.type == "conversation.item.create")
    return creates == 20 and len(reader.problems) <= (1 if sig == signal.SIGKILL else 0)


def _item(item_id: str, text: str = "hi") -> dict[str, Any]:
    return {"id": item_id, "type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


# -- 4. planted secrets ------------------------------------------------------------------------------------------------


def _random_splits(rng: random.Random, n: int) -> list[Plant]:
    """The stream plants again, each secret cut at random places (1 to 8 characters a delta)."""
    out = []
    streams = [p for p in PLANTS if p.kind == "streamed deltas"]
    for k in range(n):
        plant = streams[k % len(streams)]
        joined = "".join(e["delta"] for _, e in plant.lines if "delta" in e)
        pieces, at = [], 0
        while at < len(joined):
            step = rng.randint(1, 8)
            pieces.append(joined[at : at + step])
            at += step
        template = next(e for _, e in plant.lines if "delta" in e)
        lines = [("server", {**template, "event_id": f"ev_r{j}", "delta": p}) for j, p in enumerate(pieces)]
        out.append(Plant(f"{plant.name} (random split {k})", plant.kind, lines, plant.needles))
    return out


def class_4(quick: bool, tmp: Path) -> None:
    plants = PLANTS + _random_splits(random.Random(16), 10 if quick else 120)
    trace = tmp / "planted.jsonl"
    trace.write_bytes(dumps_lines(corpus_lines(plants)))
    assert len(survivors(trace.read_bytes(), plants)) == len(plants)

    def tally(pipeline: str, data: bytes, subset: list[Plant]) -> None:
        left = set(survivors(data, subset))
        TALLY.secrets += len(left)
        for p in subset:
            TALLY.case(4, p.name not in left, f"{pipeline}: {p.name} survived")

    flags = {"redact": [], "redact --user-text --audio --tool-output": ["--user-text", "--audio", "--tool-output"]}
    for name, extra in flags.items():
        out = tmp / "clean.jsonl"
        proc = run(["redact", str(trace), "-o", str(out), *extra], tmp)
        TALLY.case(4, clean(proc) and proc is not None and proc.returncode == 0, f"{name} exit")
        tally(name, out.read_bytes() + (proc.stdout + proc.stderr if proc else b""), plants)
        piped = run(["redact", str(trace), *extra], tmp)
        tally(f"{name} to stdout", piped.stdout if piped else b"", plants)
    reports = tmp / "reports"
    reports.mkdir()
    runs = {
        "analyze": ["analyze", str(trace)],
        "analyze -f json": ["analyze", str(trace), "-f", "json"],
        "analyze --html --markdown --sarif --junit": ["analyze", str(trace)]
        + [f"--{k}={reports / ('r.' + k)}" for k in ("html", "markdown", "sarif", "junit")],
        "report": ["report", str(trace)],
        "show": ["show", str(trace)],
        "convert": ["convert", str(trace), "-o", str(reports / "converted.jsonl")],
    }
    for name, args in runs.items():
        proc = run(args, tmp, timeout=120)
        data = proc.stdout + proc.stderr if proc else b""
        for f in reports.iterdir():
            data += f.read_bytes()
            f.unlink()
        TALLY.case(4, clean(proc), f"{name}: no answer or a traceback")
        tally(name, data, plants)
    for conn in range(1, len(PLANTS) + 1, 4 if quick else 1):
        proc = run(["show", str(trace), "--conn", str(conn)], tmp)
        tally(f"show --conn {conn}", proc.stdout + proc.stderr if proc else b"", [plants[conn - 1]])
    live = [p for p in plants if all(d != "meta" for d, _ in p.lines)]
    tally("record (live)", asyncio.run(_live_record(tmp, live)), live)
    streamed = stream_plants(plants)
    client = [p for p in plants if all(d == "client" for d, _ in p.lines)]
    tally("serve --from --record", asyncio.run(_serve_record(tmp, streamed, client)), streamed + client)


async def _live_record(tmp: Path, plants: list[Plant]) -> bytes:
    """The plants through `rtrace record`: client events from a client, server events from a scripted upstream."""
    from websockets.asyncio.server import ServerConnection, serve

    server_events = [e for p in plants for d, e in p.lines if d == "server"]
    client_events = [e for p in plants for d, e in p.lines if d == "client"]

    async def upstream(ws: ServerConnection) -> None:
        await ws.recv()

        async def drain() -> None:  # keep reading, or the close handshake waits behind unread frames
            with contextlib.suppress(Exception):
                async for _ in ws:
                    pass

        reading = asyncio.create_task(drain())
        for event in server_events:
            await ws.send(orjson.dumps(event).decode())
        await ws.close(4000, f"bad api-key={KEY}")
        await reading

    trace = tmp / "live.jsonl"
    async with serve(upstream, "127.0.0.1", 0, ping_interval=None) as up:
        port = next(iter(up.sockets)).getsockname()[1]
        async with _recorder(f"ws://127.0.0.1:{port}/v1", trace) as (proc, url):
            await keyed_session(url, KEY, client_events)
            proc.send_signal(signal.SIGTERM)
            out, err = await asyncio.wait_for(proc.communicate(), 15)
    data = trace.read_bytes()
    TALLY.case(4, KEY.encode() not in data + out + err and b"Traceback" not in err, "record: the client's key leaked")
    return data + out + err


async def _serve_record(tmp: Path, streamed: list[Plant], client: list[Plant]) -> bytes:
    from websockets.asyncio.client import connect

    from rtrace.net.link.server import ServerOptions, run_server

    source, trace = tmp / "responses.jsonl", tmp / "serve.jsonl"
    source.write_bytes(dumps_lines(responses_lines(streamed)))
    async with (
        run_server(ServerOptions(record=trace, from_trace=str(source))) as srv,
        connect(f"{srv.url}/realtime?model=m&api-key={KEY}", max_size=None) as ws,
    ):
        for plant in client:
            for _, event in plant.lines:
                await ws.send(orjson.dumps(event).decode())
        done = 0
        await ws.send('{"type":"response.create"}')
        async with asyncio.timeout(60):
            while done < len(streamed):
                event = orjson.loads(await ws.recv())
                if event.get("type") == "response.done":
                    done += 1
                    if done < len(streamed):
                        await ws.send('{"type":"response.create"}')
    return trace.read_bytes()


# -- 5. replay and keys ------------------------------------------------------------------------------------------------


def class_5(quick: bool, tmp: Path) -> None:
    from rtrace.net.replay.runner import ReplayFailed, ReplayOptions, _headers_for, check_key_target

    os.environ["HARDEN_KEY"] = KEY
    targets = [
        ("ws://127.0.0.1:9/v1", True), ("ws://127.9.9.9:9/v1", True), ("ws://localhost:9/v1", True),
        ("ws://[::1]:9/v1", True), ("wss://api.example/v1", True), ("wss://192.0.2.1/v1", True),
        ("ws://192.0.2.1/v1", False), ("ws://api.example/v1", False), ("ws://10.0.0.1:8080/v1", False),
        ("ws://0.0.0.0:9/v1", False), ("ws://127.0.0.1.example/v1", False),
    ]  # fmt: skip
    for (target, allowed), env in itertools.product(targets, (None, "HARDEN_KEY", "NO_SUCH_VARIABLE")):
        told: list[str] = []
        options = ReplayOptions(target=target, api_key_env=env, on_key=told.append)
        try:
            check_key_target(target, env)
            headers = _headers_for(target, options)
            refused = False
        except (ValueError, ReplayFailed) as e:
            headers, refused = [], True
            if KEY in str(e):
                TALLY.secrets += 1
        if env is None:
            ok = headers == [] and not refused and not told
        elif env == "NO_SUCH_VARIABLE":
            ok = refused
        else:
            ok = (headers == [("Authorization", f"Bearer {KEY}")] and len(told) == 1) if allowed else refused
            ok = ok and all(KEY not in t for t in told)
        TALLY.case(5, ok, f"replay --target {target} --api-key-env {env}: headers={bool(headers)} refused={refused}")
    # Whole runs: OPENAI_API_KEY set, a loopback endpoint that keeps the headers it was sent.
    for asked in (False, True) if quick else (False, True, False, True):
        TALLY.case(5, asyncio.run(_replay_headers(tmp, asked)), f"replay sent a key (asked: {asked})")
    for args in (
        ["--target", "ws://192.0.2.1/v1", "--api-key-env", "HARDEN_KEY"],
        ["--compare", "ws://192.0.2.1/v1", "--api-key-env", "HARDEN_KEY"],
    ):
        proc = run(["replay", str(SAMPLE), *args], tmp, timeout=30)
        ok = clean(proc) and proc is not None and proc.returncode == 2 and KEY.encode() not in proc.stdout + proc.stderr
        TALLY.case(5, ok, f"replay {' '.join(args)}: {proc and proc.returncode}")


async def _replay_headers(tmp: Path, asked: bool) -> bool:
    from websockets.asyncio.server import ServerConnection, serve

    seen: list[str | None] = []

    async def handler(ws: ServerConnection) -> None:
        assert ws.request is not None
        seen.append(ws.request.headers.get("Authorization"))
        await ws.send('{"type":"session.created","event_id":"e1","session":{}}')
        await ws.close()

    async with serve(handler, "127.0.0.1", 0, ping_interval=None) as server:
        url = f"ws://127.0.0.1:{next(iter(server.sockets)).getsockname()[1]}/v1"
        extra = ["--api-key-env", "HARDEN_KEY"] if asked else []
        proc = await asyncio.create_subprocess_exec(
            *RTRACE, "replay", str(SAMPLE), "--target", url, "--timeout", "300ms", *extra,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**os.environ, "OPENAI_API_KEY": KEY},
        )  # fmt: skip
        out, err = await asyncio.wait_for(proc.communicate(), 60)
    sent_right = seen and all(h == (f"Bearer {KEY}" if asked else None) for h in seen)
    told = (b"goes to " + url.encode() in err) == asked
    return bool(sent_right and told and KEY.encode() not in out + err and b"Traceback" not in err)


# -- 6. injection in paths and trace text ------------------------------------------------------------------------------

HOSTILE_NAMES = [
    "\x1b[31mred\x1b[0m",
    "\x1b]0;pwned\x07title",
    "\x1b]8;;http:evil.example\x1b\\link",  # (no slash: it is a file name)
    "\x9b2Jc1",
    "\u202eevil\u202c",
    "line\u2028sep",
    "back\x08space\x7f",
    "\x1b[2J\x1b[H",
]
PATH_COMMANDS = [
    ["analyze", "H"], ["analyze", "M"], ["analyze", "-f", "json", "M"], ["analyze", "H", "-o", "O"],
    ["analyze", "H", "--html", "O"], ["analyze", "H", "--json", "N/x.json"], ["show", "H"], ["show", "M"],
    ["show", "H", "--conn", "1"], ["report", "H"], ["report", "M"], ["report", "H", "-o", "O.md"],
    ["redact", "H", "-o", "O"], ["redact", "M"], ["convert", "H", "-o", "O"], ["convert", "M", "-o", "O"],
    ["replay", "M"], ["replay", "H", "-o", "O", "--timeout", "1s"], ["rules", "H"], ["serve", "--from", "M"],
    ["analyze", "--format", "H", "H"], ["record", "--upstream", "ws://h/v1#H", "-o", "O"],
]  # fmt: skip


def class_6(quick: bool, tmp: Path) -> None:
    for k, name in enumerate(HOSTILE_NAMES[:: 4 if quick else 1]):
        folder = tmp / f"n{k}"
        folder.mkdir()
        trace = folder / f"{name}.jsonl"
        trace.write_bytes(_evil_trace())
        values = {
            "H": str(trace),
            "M": str(folder / f"no{name}.jsonl"),
            "O": str(folder / f"o{name}"),
            "N": str(folder / f"n{name}"),
        }
        for args in PATH_COMMANDS:
            argv = [_subst(a, values) for a in args]
            proc = run(argv, folder, timeout=60)
            raw = RAW_CONTROL.search(proc.stdout + proc.stderr) if proc else None
            ok = clean(proc) and raw is None
            TALLY.case(6, ok, f"{args} with {name!r}: raw {raw.group() if raw else None!r}")
    html = tmp / "evil.html"
    trace = tmp / "evil.jsonl"
    trace.write_bytes(_evil_trace())
    for fmt, out in (("html", html), ("markdown", tmp / "evil.md")):
        proc = run(["report", str(trace), "-o", str(out)], tmp)
        text = out.read_text() if out.exists() else ""
        prose = outside_code(text) if fmt == "markdown" else text
        ok = clean(proc) and "<script>alert" not in prose and "<img src=x" not in prose and "\x1b" not in text
        if fmt == "markdown":  # (the HTML report embeds the text as JSON data, shown with textContent)
            ok = ok and re.search("[\u202a-\u202e\u2028\u2029\u0080-\u009f]", text) is None
        TALLY.case(6, ok, f"report {fmt}: markup or raw controls from the trace")


def _subst(arg: str, values: dict[str, str]) -> str:
    if arg in values:
        return values[arg]
    for k, v in values.items():
        if arg.startswith(k + ".") or arg.startswith(k + "/"):
            return v + arg[1:]
    return arg.replace("#H", "#" + HOSTILE_NAMES[0])


def _evil_trace() -> bytes:
    evil = "\x1b[31m<script>alert(1)</script><img src=x onerror=alert(2)>\u202e\u2028\x9b2J [bold]x[/bold]"
    lines = [
        {"t": 0.0, "dir": "meta", "conn": 1, "event": {"type": "connection.opened", "path": "/v1?x=" + evil}},
        {"t": 0.01, "dir": "server", "conn": 1, "event": {"type": "session.created", "session": {}}},
        {
            "t": 0.02,
            "dir": "client",
            "conn": 1,
            "event": {"type": "conversation.item.create", "event_id": "e1", "item": _item("item_" + evil, evil)},
        },
        {
            "t": 0.03,
            "dir": "server",
            "conn": 1,
            "event": {
                "type": "error",
                "error": {"code": evil, "message": f"Item 'item_{evil}' " + evil, "event_id": "e1"},
            },
        },
        {
            "t": 0.04,
            "dir": "client",
            "conn": 1,
            "event": {"type": "conversation.item.delete", "item_id": "item_" + evil},
        },
        {
            "t": 0.05,
            "dir": "client",
            "conn": 1,
            "event": {"type": "conversation.item.delete", "item_id": "item_" + evil},
        },
        {"t": 9.0, "dir": "meta", "conn": 1, "event": {"type": "connection.closed", "reason": evil}},
    ]
    return dumps_lines(lines) + evil.encode() + b"\n"


# -- 7. special files --------------------------------------------------------------------------------------------------

READERS = [
    ["analyze", "F"], ["show", "F"], ["report", "F"], ["redact", "F"], ["convert", "F", "-o", "out.jsonl"],
    ["replay", "F", "--timeout", "1s"], ["analyze", "F", "--html", "r.html"],
]  # fmt: skip


def class_7(quick: bool, tmp: Path) -> None:
    fifo = tmp / "fifo.jsonl"
    os.mkfifo(fifo)
    sock_path = tmp / "sock.jsonl"
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(sock_path))
    specials = {"fifo": str(fifo), "/dev/zero": "/dev/zero", "/dev/urandom": "/dev/urandom", "/dev/null": "/dev/null",
                "socket": str(sock_path)}  # fmt: skip
    for (name, path), args in itertools.product(specials.items(), READERS[:: 3 if quick else 1]):
        proc = run([path if a == "F" else a for a in args], tmp, timeout=30)
        ok = (
            clean(proc)
            and proc is not None
            and proc.returncode == 3
            and b"not a regular file" in proc.stdout + proc.stderr
        )
        TALLY.case(7, ok, f"{args[0]} {name}: {proc and proc.returncode}")
    # /dev/zero is binary data: not a text trace, said at once (the bound on a line that never ends is held by
    # tests/test_hardening.py with an endless line of text); /dev/urandom is binary data too.
    for name, limit in itertools.product(("/dev/zero",), ("1024", "65536", "1048576", None)):
        for command in ("analyze", "show", "redact") if not quick else ("analyze",):
            extra = ["--max-line-bytes", limit] if limit else []
            proc = run([command, name, "--allow-special-files", *extra], tmp, timeout=60)
            ok = clean(proc) and proc is not None and proc.returncode in (0, 3)
            TALLY.case(7, ok, f"{command} {name} allowed, --max-line-bytes {limit}: {proc and proc.returncode}")
    for command in ("analyze", "show", "redact", "report"):
        with open("/dev/zero", "rb") as zero:
            proc = run([command, "-"], tmp, timeout=60, stdin=zero)
        TALLY.case(7, clean(proc) and proc is not None and proc.returncode in (0, 3), f"{command} - < /dev/zero")
    listener.close()


# -- 8. signals, floods, parallel clients, --host, bidi ----------------------------------------------------------------


def class_8(quick: bool, tmp: Path) -> None:
    for k in range(1 if quick else 3):
        took, closed = asyncio.run(_stalled_client_sigterm(tmp, k))
        TALLY.case(8, took < 2.0 and closed, f"record with a stalled client: {took:.1f} s to exit on SIGTERM")
    for command, host in itertools.product(
        ("serve", "record"), ("", " ", "a,b", "127.0.0.1,::1", "no-such-host.invalid")
    ):
        extra = ["--upstream", "ws://127.0.0.1:9/v1", "-o", os.devnull] if command == "record" else []
        proc = run([command, *extra, "--host", host], tmp, timeout=30)
        TALLY.case(8, clean(proc) and proc is not None and proc.returncode == 2, f"{command} --host {host!r}")
    ok, n = asyncio.run(_parallel_clients(tmp, 20 if quick else 300))
    TALLY.case(8, ok, f"{n} parallel clients through record: a frame or a close missing from the trace")
    TALLY.case(8, asyncio.run(_flood(tmp, 2000 if quick else 20000)), "a flood through record lost frames")
    from rtrace.engine.fold import Report, analyze_path
    from rtrace.report import markdown
    from rtrace.rules.base import Config

    for k, text in enumerate(["\u202eevil", "a\u2028b", "x\u2066y\u2069", "\u200fz", "\u009b2J"]):
        path = tmp / f"bidi{k}.jsonl"
        lines = orjson.loads(orjson.dumps([orjson.loads(x) for x in SAMPLE.read_bytes().splitlines()]))
        for line in lines:
            event = line.get("event", {})
            if event.get("type") == "error":
                event["error"]["message"] = text + event["error"].get("message", "")
        path.write_bytes(dumps_lines(lines))
        md = markdown.render(Report([analyze_path(path)], Config()))
        TALLY.case(
            8,
            re.search("[\u202a-\u202e\u2028\u2029\u2066-\u2069\u200e\u200f\u0080-\u009f]", md) is None,
            f"markdown kept {text!r} raw",
        )


async def _stalled_client_sigterm(tmp: Path, k: int) -> tuple[float, bool]:
    from websockets.asyncio.client import connect
    from websockets.asyncio.server import ServerConnection, serve

    async def upstream(ws: ServerConnection) -> None:
        await ws.send('{"type":"session.created","event_id":"e0","session":{}}')
        delta = orjson.dumps({"type": "response.output_audio.delta", "delta": "QUJD" * 16000}).decode()
        with contextlib.suppress(Exception):
            async for _ in ws:
                for _ in range(100_000):
                    await ws.send(delta)

    trace = tmp / f"stalled{k}.jsonl"
    async with serve(upstream, "127.0.0.1", 0, ping_interval=None) as up:
        port = next(iter(up.sockets)).getsockname()[1]
        async with _recorder(f"ws://127.0.0.1:{port}/v1", trace) as (proc, url):
            ws = await connect(f"{url}/realtime?model=m", max_size=None)
            await ws.recv()
            await ws.send('{"type":"response.create"}')
            ws.transport.pause_reading()
            await asyncio.sleep(1.0)
            started = time.monotonic()
            proc.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(proc.wait(), 20)
            except asyncio.TimeoutError:
                TALLY.hangs += 1
            took = time.monotonic() - started
            ws.transport.abort()
    with TraceReader.open(trace) as reader:
        records = list(reader)
    return took, bool(records) and records[-1].type == "connection.closed"


async def _parallel_clients(tmp: Path, n: int) -> tuple[bool, int]:
    from websockets.asyncio.client import connect

    from rtrace.net.link.server import ServerOptions, run_server

    trace = tmp / "parallel.jsonl"
    async with run_server(ServerOptions()) as srv, _recorder(srv.url, trace) as (proc, url):

        async def client(k: int) -> int:
            async with connect(f"{url}/realtime?model=m", open_timeout=30) as ws:
                await ws.recv()
                for j in range(5):
                    await ws.send(
                        orjson.dumps({"type": "conversation.item.create", "item": _item(f"c{k}_{j}")}).decode()
                    )
                got = 0
                async with asyncio.timeout(60):
                    while got < 5:
                        if orjson.loads(await ws.recv()).get("type") == "conversation.item.added":
                            got += 1
                return got

        results = await asyncio.gather(*(client(k) for k in range(n)), return_exceptions=True)
        await asyncio.sleep(0.5)
        proc.send_signal(signal.SIGTERM)
        await asyncio.wait_for(proc.wait(), 20)
    with TraceReader.open(trace) as reader:
        records = list(reader)
    creates = sum(1 for r in records if r.type == "conversation.item.create")
    opened = {r.conn for r in records if r.type == "connection.opened"}
    closed = {r.conn for r in records if r.type == "connection.closed"}
    served = sum(r for r in results if isinstance(r, int))
    return creates == 5 * n and served == 5 * n and opened == closed and len(opened) == n, n


async def _flood(tmp: Path, n: int) -> bool:
    from websockets.asyncio.client import connect

    from rtrace.net.link.server import ServerOptions, run_server

    trace = tmp / "flood.jsonl"
    append = orjson.dumps({"type": "input_audio_buffer.append", "audio": "AAAA" * 256}).decode()
    async with run_server(ServerOptions()) as srv, _recorder(srv.url, trace) as (proc, url):
        async with connect(f"{url}/realtime?model=m") as ws:
            await ws.recv()
            for _ in range(n):
                await ws.send(append)
            await ws.send(orjson.dumps({"type": "conversation.item.create", "item": _item("last")}).decode())
            async with asyncio.timeout(60):
                while orjson.loads(await ws.recv()).get("type") != "conversation.item.added":
                    pass
        proc.send_signal(signal.SIGTERM)
        await asyncio.wait_for(proc.wait(), 20)
    with TraceReader.open(trace) as reader:
        appends = sum(1 for r in reader if r.type == "input_audio_buffer.append")
    return appends == n


# -- 9-11. side inputs (issue 28) ------------------------------------------------------------------------------------


def _side_cases(cls: int, cases: Iterator[Any], tmp: Path, every: int = 1) -> None:
    for k, case in enumerate(cases):
        if k % every:
            continue
        where = tmp / f"case{cls}-{k}"
        where.mkdir()
        args = case.write(where)
        proc = run(args, where, timeout=60, stdin=subprocess.DEVNULL)
        said = (proc.stdout + proc.stderr).decode("utf-8", "replace") if proc is not None else "(hung)"
        ok = clean(proc) and proc is not None and case.held(proc.returncode, said)
        TALLY.case(cls, ok, f"{case.name}: exit {proc and proc.returncode}: {' '.join(said.split())[-200:]}")


def class_9(quick: bool, tmp: Path) -> None:
    _side_cases(9, side_inputs.depth_cases(side_inputs.DEPTHS[:2] if quick else side_inputs.DEPTHS), tmp,
                every=5 if quick else 1)  # fmt: skip


def class_10(quick: bool, tmp: Path) -> None:
    _side_cases(10, side_inputs.regex_cases(), tmp, every=4 if quick else 1)
    from rtrace.core.inputs import PATTERN_SECONDS, pattern_search, user_pattern
    from rtrace.net.faults.script import ResponseContext, _holds, parse_script

    rng = random.Random(10)
    for pattern, text in side_inputs.CATASTROPHIC * (1 if quick else 5):
        # through the script's own matcher, with the text grown at random: a search is abandoned in time
        text = text * rng.randint(1, 4)
        quoted = pattern.replace("\\", "\\\\").replace('"', '\\"')
        script = parse_script(f'[[turn]]\nwhen = {{ user_regex = "{quoted}" }}\ntext = "x"\n')
        ctx = ResponseContext(connection=1, response=1, user_text=text, answered=False, tool_output=None)
        started = time.perf_counter()
        for turn in script.turns:  # the script's own matcher
            _holds(turn, ctx)
        pattern_search(user_pattern(pattern), text)
        took = time.perf_counter() - started
        TALLY.case(10, took < 40 * PATTERN_SECONDS + 1, f"{pattern!r} on {len(text)} characters took {took:.2f} s")


def class_11(quick: bool, tmp: Path) -> None:
    _side_cases(11, side_inputs.special_cases(), tmp, every=4 if quick else 1)


# -- 12. LiveKit logs --------------------------------------------------------------------------------------------------


def class_12(quick: bool, tmp: Path) -> None:
    from rtrace.engine.parallel import analyze_file
    from rtrace.rules import RULES
    from rtrace.rules.base import Config

    def what(report: Any) -> tuple[int, list[tuple[str, str]]]:  # a preamble moves line numbers, nothing else
        return report.events, [(f.rule, re.sub(r"line \d+", "line N", f.message)) for f in report.findings]

    plain: dict[str, Any] = {}
    for k, (log, variant, data) in enumerate(side_inputs.log_variants()):
        if quick and k % 6:
            continue
        if log not in plain:
            plain[log] = what(analyze_file(str(side_inputs.LOGS / log), Config(), RULES, 1 << 24))
        path = tmp / f"{k}.log"
        path.write_bytes(data)
        got = analyze_file(str(path), Config(), RULES, 1 << 24)
        TALLY.case(12, got.unreadable is None and what(got) == plain[log] and plain[log][0] > 0,
                   f"{log}, {variant}: {got.unreadable or len(got.findings)} findings")  # fmt: skip
        if k % 10 == 0:  # and through the command line, in its own process
            proc = run(["analyze", str(path), "--isolated", "-f", "json"], tmp, timeout=60)
            ok = clean(proc) and proc is not None and proc.returncode == (1 if plain[log][1] else 0)
            if ok and proc is not None:
                report = orjson.loads(proc.stdout)
                rules = [f["rule"] for t in report["traces"] for f in t["findings"]]
                ok = rules == [r for r, _ in plain[log][1]]
            TALLY.case(12, ok, f"rtrace analyze {log}, {variant}: exit {proc and proc.returncode}")


# -- 13. compressed streams --------------------------------------------------------------------------------------------


def class_13(quick: bool, tmp: Path) -> None:
    import shutil

    import zstandard

    from bench.bench_zstd import make_trace, scan
    from rtrace.core.inputs import _ZstdFrames

    plain = tmp / "call.jsonl"
    make_trace(plain, 4 if quick else 16)
    data = plain.read_bytes()
    packers = {
        "zstd": zstandard.ZstdCompressor(level=3).compress,
        "zstd, checksum, 3 frames": lambda b: b"".join(
            zstandard.ZstdCompressor(write_checksum=True).compress(b[k : k + len(b) // 3 + 1])
            for k in range(0, len(b), len(b) // 3 + 1)
        ),
    }
    import bz2
    import gzip
    import lzma

    packers.update({"gzip": gzip.compress, "bzip2": bz2.compress, "xz": lzma.compress})
    rng = random.Random(13)
    for name, pack in packers.items():
        packed = pack(data)
        frames = _ZstdFrames() if name.startswith("zstd") else None
        ends = set()
        if frames is not None:  # where frames end, to know which cuts are clean
            at = 0
            for piece in (packed[k : k + 4096] for k in range(0, len(packed), 4096)):
                for j in range(len(piece)):
                    frames.feed(piece[j : j + 1])
                    if frames.between:
                        ends.add(at + j + 1)
                at += len(piece)
        cuts = sorted({rng.randrange(1, len(packed)) for _ in range(8 if quick else 60)} | {len(packed)})
        for cut in cuts:
            try:
                with TraceReader(io.BytesIO(packed[:cut]), "t.jsonl") as reader:
                    records = sum(1 for _ in reader.rows())
                ok = records > 0 or cut < (1_000_000 if name == "bzip2" else 100_000)  # bzip2: 900 kB blocks
                if name.startswith("zstd"):
                    ok = ok and (reader.broken is None) == (cut in ends or cut == len(packed))
                else:
                    ok = ok and (reader.broken is None) == (cut == len(packed))
            except Exception as e:  # a case that raises is a failed case
                ok = False
                TALLY.tracebacks += 1
                records = f"{type(e).__name__}: {e}"  # type: ignore[assignment]
            TALLY.case(13, ok, f"{name} cut at {cut:,} of {len(packed):,}: {records}")
    # linear: the line scan of a realistically compressed trace within 1.5x `zstd -dc | wc -l`
    if shutil.which("zstd") is not None:
        packed_path = tmp / "call.jsonl.zst"
        subprocess.run(["zstd", "-q", "-3", str(plain), "-o", str(packed_path)], check=True)
        for _ in range(1 if quick else 3):
            pipe = min(_timed(lambda: subprocess.run(f"zstd -dc {packed_path} | wc -l", shell=True,
                                                     capture_output=True, check=True)) for _ in range(3))  # fmt: skip
            read = min(_timed(lambda: scan(packed_path)) for _ in range(3))
            TALLY.case(13, read <= 1.5 * pipe, f"line scan {read:.3f} s against zstd -dc | wc -l {pipe:.3f} s")


def _timed(fn: Callable[[], object]) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


# -- the table ---------------------------------------------------------------------------------------------------------

RUNNERS: dict[int, Callable[[bool, Path], None]] = {
    1: class_1, 2: class_2, 3: class_3, 4: class_4, 5: class_5, 6: class_6, 7: class_7, 8: class_8,
    9: class_9, 10: class_10, 11: class_11, 12: class_12, 13: class_13,
}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    return run_classes(RUNNERS, CLASSES, OUT, argv, __doc__ or "")


def run_classes(
    runners: dict[int, Callable[[bool, Path], None]],
    classes: dict[int, str],
    out: Path,
    argv: list[str] | None,
    doc: str,
) -> int:
    """Run `runners` (`--only`, `--quick` from `argv`), print the table, write `out`; 1 when a case failed (the
    main of this harness and of `bench/harden_hunt.py`)."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("--only", default="", help="comma-separated class numbers (default: all)")
    parser.add_argument("--quick", action="store_true", help="a sample of each class")
    args = parser.parse_args(argv)
    given = [int(c) for c in args.only.split(",") if c.strip()]
    only = [c for c in given if c in runners] if given else list(runners)  # the other harness has the rest
    started = time.monotonic()
    times: dict[int, float] = {}
    for cls in only:
        t0 = time.monotonic()
        with tempfile.TemporaryDirectory(prefix=f"rtrace-harden-{cls}-") as tmp:
            runners[cls](args.quick, Path(tmp))
        times[cls] = time.monotonic() - t0
        print(f"  class {cls}: {TALLY.tried.get(cls, 0)} cases in {times[cls]:.0f} s", file=sys.stderr, flush=True)
    print(f"\n{'class':<76} {'tried':>7} {'held':>7} {'failed':>7}")
    for cls in only:
        tried, failed = TALLY.tried.get(cls, 0), len(TALLY.failed.get(cls, []))
        print(f"{cls}. {classes[cls]:<73} {tried:>7} {tried - failed:>7} {failed:>7}")
    total = sum(TALLY.tried.get(c, 0) for c in only)
    bad = sum(len(TALLY.failed.get(c, [])) for c in only)
    print(f"{'total':<76} {total:>7} {total - bad:>7} {bad:>7}")
    print(f"secrets surviving: {TALLY.secrets}, tracebacks: {TALLY.tracebacks}, hangs: {TALLY.hangs}")
    print(f"({time.monotonic() - started:.0f} s{', --quick' if args.quick else ''})")
    for cls in only:
        for what in TALLY.failed.get(cls, [])[:10]:
            print(f"  failed, class {cls}: {what[:300]}")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(
        orjson.dumps(
            {
                "quick": args.quick,
                "seconds": round(time.monotonic() - started, 1),
                "classes": {
                    str(c): {
                        "name": classes[c],
                        "tried": TALLY.tried.get(c, 0),
                        "failed": len(TALLY.failed.get(c, [])),
                        "seconds": round(times[c], 1),
                        "failures": TALLY.failed.get(c, [])[:50],
                    }
                    for c in only
                },
                "secrets_surviving": TALLY.secrets,
                "tracebacks": TALLY.tracebacks,
                "hangs": TALLY.hangs,
            },
            option=orjson.OPT_INDENT_2,
        )
    )
    return 1 if bad or TALLY.secrets or TALLY.tracebacks or TALLY.hangs else 0


if __name__ == "__main__":
    sys.exit(main())
