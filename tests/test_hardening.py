"""Hostile input, tried and counted: the loader, reducer, reports and the CLI fed bytes, JSON and traces from nowhere.

Every case is bounded in time (SIGALRM) and memory (peak RSS; RLIMIT_AS in forked CLI runs). The suite runs a small
bounded profile; `make fuzz` (HYPOTHESIS_PROFILE=long) runs the same properties with many more examples and prints
hypothesis' statistics (the counts of the closing note).
"""

from __future__ import annotations

import contextlib
import io
import os
import random
import re
import resource
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rich.console import Console

from rtrace.core.loader import TraceReader
from rtrace.engine.fold import Report, analyze_path, analyze_records
from rtrace.report import json_report, terminal
from rtrace.report.outputs import ReportFormat, render_bytes
from rtrace.rules import RULES as RULES_ALL
from rtrace.rules.base import Config

from . import side_inputs
from .catalog_trace import CATALOG_LINES, dumps_lines, field_paths, mutated, mutations
from .hostile_trace import outside_code
from .strategies import envelopes

LONG = os.environ.get("HYPOTHESIS_PROFILE") == "long"
#: Examples per property: the hypothesis default of the loaded profile when long, a small number in the suite.
FUZZ = settings(
    max_examples=settings.default.max_examples if LONG else 40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
    derandomize=not LONG,
)
#: Seconds one case may take (a hang is a failure, not a stuck suite).
CASE_SECONDS = 20
#: Peak resident memory the test process may reach (the 50 MB-line cases included).
MAX_RSS_BYTES = 1536 * 1024 * 1024

OK_LINE = b'{"t":0.0,"dir":"server","conn":1,"event":{"type":"session.created","event_id":"e1","session":{}}}'
_LOCATION = re.compile(r":(\d+):(\d+): ")


@contextlib.contextmanager
def bounded(seconds: int = CASE_SECONDS) -> Iterator[None]:
    """Fail the case if it runs longer than `seconds` or if the process' peak RSS passes the bound."""

    def expired(signum: int, frame: Any) -> None:
        raise TimeoutError(f"case took over {seconds} s")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    assert peak < MAX_RSS_BYTES, f"peak RSS {peak / 2**20:.0f} MiB"


def read_all(data: bytes, **kw: Any) -> tuple[list[Any], TraceReader]:
    reader = TraceReader(io.BytesIO(data), "fuzz.jsonl", **kw)
    records = list(reader)
    line_count = data.count(b"\n") + 1
    for p in reader.problems:
        assert 1 <= p.line <= line_count + 1, p
        assert p.col >= 1, p
        assert str(p).startswith(f"fuzz.jsonl:{p.line}:{p.col}: ")
        assert "\x1b" not in str(p) and "\x1b" not in p.excerpt
    assert reader.problem_count >= len(reader.problems)
    lines = [r.line for r in records]
    assert lines == sorted(lines) and len(set(lines)) == len(lines)
    assert [r.seq for r in records] == list(range(len(records)))
    return records, reader


def render_everything(records: list[Any], tmp: Path, data: bytes) -> None:
    """Analyze, then every renderer: none may raise, the terminal one never lets an ESC through."""
    findings, _ = analyze_records(records, Config())
    path = tmp / "case.jsonl"
    path.write_bytes(data)
    report = Report([analyze_path(path)], Config())
    assert [f.rule for f in report.findings] == [f.rule for f in findings]
    out = io.StringIO()
    terminal.render(report, Console(file=out, width=100, color_system=None, highlight=False))
    assert "\x1b" not in out.getvalue()
    orjson.loads(json_report.render(report))
    for fmt in ReportFormat:
        render_bytes(report, fmt)


# -- in-process properties --------------------------------------------------------------------------------------

_JSON = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(2**63), 2**64 - 1),
        st.floats(),
        st.text(),
        st.sampled_from(["session.created", "conversation.item.create", "response.done", "\x1b[31m", "\x00"]),
    ),
    lambda kids: st.one_of(st.lists(kids, max_size=5), st.dictionaries(st.text(max_size=8), kids, max_size=5)),
    max_leaves=30,
)


@st.composite
def hostile_line(draw: st.DrawFn) -> bytes:
    kind = draw(st.integers(0, 6))
    if kind == 0:
        return draw(st.binary(max_size=200)).replace(b"\n", b"")
    if kind == 1:
        return orjson.dumps(draw(_JSON))  # NaN and infinities are written as null
    if kind == 2:  # an envelope with junk in one field
        env: dict[str, Any] = {"t": 0.5, "dir": "client", "conn": 1, "event": {"type": "conversation.item.create"}}
        env[draw(st.sampled_from(["t", "dir", "conn", "event", "type", "src", "source", "time"]))] = draw(_JSON)
        return orjson.dumps(env)
    if kind == 3:  # a valid line cut, or with a NUL / invalid UTF-8 spliced in
        raw = OK_LINE
        at = draw(st.integers(0, len(raw)))
        junk = draw(st.sampled_from([b"", b"\x00", b"\xff", b"\xc3(", b"\xed\xa0\x80", b"\\u0000", b"\r"]))
        return raw[:at] + junk + raw[at + draw(st.integers(0, 3)) :]
    if kind == 4:  # nesting around or inside an event
        depth = draw(st.sampled_from([10, 254, 255, 256, 1023, 1024, 1025, 5000]))
        inner = b"[" * depth + b"]" * depth
        if draw(st.booleans()):
            return inner
        return b'{"t":0.1,"dir":"client","conn":1,"event":{"type":"conversation.item.create","item":' + inner + b"}}"
    if kind == 5:  # numbers the parser may not hold
        num = draw(
            st.sampled_from([b"1e400", b"-1e400", b"NaN", b"Infinity", b"18446744073709551616", b"-0", b"1.0e-400"])
        )
        return b'{"t":' + num + b',"dir":"server","conn":' + num + b',"event":{"type":"response.done"}}'
    return draw(
        st.sampled_from([b"", b"   ", b"\t", b"{}", b"[]", b"null", b'"x"', b'{"rtrace":1}', b'{"rtrace":"1"}'])
    )


@FUZZ
@given(data=st.binary(max_size=4096))
def test_loader_arbitrary_bytes(data: bytes) -> None:
    with bounded():
        read_all(data)


@FUZZ
@given(lines=st.lists(hostile_line(), max_size=25), bom=st.sampled_from([b"", b"\xef\xbb\xbf", b"\xff\xfe"]))
def test_loader_and_reports_on_hostile_lines(lines: list[bytes], bom: bytes) -> None:
    data = bom + b"\n".join([OK_LINE, *lines])
    with bounded(), tempfile.TemporaryDirectory() as tmp:
        records, _ = read_all(data)
        render_everything(records, Path(tmp), data)


@FUZZ
@given(value=_JSON)
def test_loader_arbitrary_json_values(value: Any) -> None:
    try:
        line = orjson.dumps(value)
    except orjson.JSONEncodeError:
        return  # NaN is not JSON; nothing to read
    with bounded():
        read_all(line + b"\n" + line)
        read_all(b'{"t":0.0,"dir":"client","conn":1,"event":' + line + b"}")


@FUZZ
@given(lines=envelopes(max_size=60))
def test_reducer_random_envelopes_colliding_ids(lines: list[dict[str, Any]]) -> None:
    """Valid envelopes of random events over a few ids and connections: every rule and renderer survives."""
    data = b"".join(orjson.dumps(x) + b"\n" for x in lines)
    with bounded(), tempfile.TemporaryDirectory() as tmp:
        records, _reader = read_all(data)
        assert len(records) == len(lines)
        render_everything(records, Path(tmp), data)


@pytest.mark.parametrize("depth", [1024, 1025, 100_000])
@pytest.mark.parametrize("shape", ["arrays", "objects", "in-event"])
def test_deep_nesting_is_a_clean_problem(depth: int, shape: str) -> None:
    if shape == "arrays":
        line = b"[" * depth + b"]" * depth
    elif shape == "objects":
        line = b'{"a":' * depth + b"1" + b"}" * depth
    else:
        line = b'{"t":0.1,"dir":"client","conn":1,"event":{"type":"x","v":' + b"[" * depth + b"]" * depth + b"}}"
    with bounded():
        records, reader = read_all(OK_LINE + b"\n" + line + b"\n" + OK_LINE)
    assert next(r.line for r in records) == 1 and records[-1].line == 3
    if depth > 1024:
        assert reader.problems[0].line == 2 and "depth limit" in reader.problems[0].message


def test_fifty_megabyte_lines_are_skipped_not_held() -> None:
    big = b'{"t":0.1,"dir":"client","conn":1,"event":{"type":"input_audio_buffer.append","audio":"'
    big += b"A" * (50 * 2**20) + b'"}}'
    for data in (OK_LINE + b"\n" + big + b"\n" + OK_LINE, OK_LINE + b"\n" + big, big * 2):
        with bounded():
            records, reader = read_all(data)
        assert any("over the" in p.message for p in reader.problems)
        assert all(r.line != 2 for r in records)
    del big, data


def test_nul_bytes_and_invalid_utf8() -> None:
    data = b"\n".join(
        [
            OK_LINE,
            b"\x00" * 100,
            OK_LINE.replace(b"e1", b"e\x00"),
            OK_LINE.replace(b"e1", b"e\xff"),
            b"\xc3\x28" + OK_LINE,
            OK_LINE.replace(b"e1", b"\xed\xa0\x80"),
        ]
    )
    with bounded():
        records, reader = read_all(data)
    assert records[0].line == 1
    assert {p.line for p in reader.problems} >= {2, 3, 4, 5}


# -- the CLI in its own process ---------------------------------------------------------------------------------

RTRACE = [sys.executable, "-m", "rtrace.cli"]
COMMANDS: dict[str, Callable[[Path, Path], list[str]]] = {
    "analyze": lambda f, tmp: ["analyze", str(f)],
    "analyze-json": lambda f, tmp: ["analyze", "-f", "json", str(f)],
    "analyze-all-outputs": lambda f, tmp: [
        "analyze",
        str(f),
        "--html",
        str(tmp / "r.html"),
        "--markdown",
        str(tmp / "r.md"),
        "--sarif",
        str(tmp / "r.sarif"),
        "--junit",
        str(tmp / "r.xml"),
    ],
    "show": lambda f, tmp: ["show", str(f)],
    "show-at": lambda f, tmp: ["show", str(f), "--at", "2"],
    "show-conn": lambda f, tmp: ["show", str(f), "--conn", "1"],
    "report-md": lambda f, tmp: ["report", str(f)],
    "redact": lambda f, tmp: [
        "redact",
        str(f),
        "-o",
        str(tmp / "red.jsonl"),
        "--user-text",
        "--audio",
        "--tool-output",
    ],
}


def _hostile_files() -> dict[str, bytes | None]:
    rng = random.Random(8)
    fifty = b"A" * (50 * 2**20)
    ev = (
        b'{"t":0.1,"dir":"client","conn":1,"event":{"type":"conversation.item.create","item":'
        b'{"id":"a","type":"message","role":"user","content":[{"type":"input_text","text":"%s"}]}}}'
    )
    return {
        "empty": b"",
        "newlines": b"\n\n\n",
        "scalars": b'null\n1\n"sk-proj-HOSTILEKEY12345678"\n[]\ntrue\n',
        "random-binary": rng.randbytes(65536),
        "nul-bytes": b"\x00" * 4096,
        "nul-in-lines": OK_LINE + b"\n\x00\x00\n" + OK_LINE.replace(b"e1", b"e\x001"),
        "invalid-utf8": OK_LINE + b"\n\xff\xfe\xfd\n" + ev.replace(b"%s", b"\xc3(") + b"\n",
        "utf16": (OK_LINE.decode() + "\n").encode("utf-16"),
        "deep-arrays-100k": OK_LINE + b"\n" + b"[" * 100_000 + b"]" * 100_000 + b"\n",
        "deep-in-event-1000": OK_LINE + b"\n" + ev.replace(b'"%s"', b"[" * 1000 + b"]" * 1000) + b"\n",
        "deep-in-event-300": OK_LINE + b"\n" + ev.replace(b'"%s"', b"[" * 300 + b"]" * 300) + b"\n",
        "line-50mb": OK_LINE + b"\n" + ev.replace(b"%s", fifty) + b"\n" + OK_LINE + b"\n",
        "line-50mb-no-newline": OK_LINE + b"\n" + fifty,
        "numbers": b'{"t":1e400,"dir":"server","conn":18446744073709551616,"event":{"type":"response.done"}}\n'
        b'{"t":NaN,"dir":"client","conn":-1,"event":{"type":"response.create"}}\n'
        b'{"t":"soon","dir":"client","conn":true,"event":{"type":"response.create"}}\n',
        "wrong-types": b'{"t":0,"dir":"client","conn":1,"event":[]}\n{"event":{"type":7}}\n'
        b'{"dir":"up","event":{"type":"x"}}\n'
        b'{"rtrace":99}\n{"rtrace":1}\n{"type":"response.create","event_id":{"x":1}}\n',
        "ansi-and-markup": OK_LINE
        + b"\n"
        + ev.replace(
            b"%s", b"\\u001b[31mred\\u001b]8;;http://x\\u0007link\\u001b]8;;\\u0007[bold]b[/bold]\\u001b]0;t\\u0007"
        )
        + b"\n"
        + b'{"t":0.2,"dir":"client","conn":1,"event":{"type":"\x1b[2J\x1b]0;pwn\x07"}}\n',
        "crlf": (OK_LINE + b"\r\n") * 3,
        "flood-50k": b"".join(
            b'{"t":%d.0,"dir":"client","conn":1,"event":{"type":"input_audio_buffer.append","audio":"QUJD"}}\n' % i
            for i in range(50_000)
        ),
        # One finding per line (the same item id created again and again).
        "same-id-300": b"".join(
            b'{"t":%d.0,"dir":"client","conn":1,"event":{"type":"conversation.item.create","event_id":"e","item":{"id":"a","type":"message"}}}\n'
            % i
            for i in range(300)
        ),
        "directory": None,
        "missing": None,
    }


HOSTILE = _hostile_files()


def _cli_ok(proc: subprocess.CompletedProcess[bytes], name: str) -> None:
    where = f"{name}: rc={proc.returncode} stderr={proc.stderr[-2000:]!r}"
    assert proc.returncode in ((0, 1, 2, 3) if name.startswith("directory") else (0, 1, 3)), where
    assert b"Traceback" not in proc.stderr and b"internal error" not in proc.stderr, where
    assert b"\x1b" not in proc.stdout, f"{name}: raw ESC in stdout"
    for line in proc.stderr.decode("utf-8", "replace").splitlines():
        if _LOCATION.search(line) is None:
            assert line.startswith(("rtrace", " ")) or "no usable event" in line or not line.strip(), where


def _run_cli(args: list[str], cwd: Path) -> subprocess.CompletedProcess[bytes]:
    limit = "import resource; resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30)); "
    code = limit + "import sys; from rtrace.cli import main; sys.argv[0] = 'rtrace'; sys.exit(main(sys.argv[1:]))"
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        timeout=120,
        cwd=cwd,
        env={**os.environ, "COLUMNS": "100"},
    )


#: The suite runs every hostile file through `analyze`, and the whole matrix only in the long profile.
_SUITE_REDACT = ("scalars", "random-binary", "line-50mb", "invalid-utf8", "deep-arrays-100k")
_MATRIX = [
    (n, c)
    for n in HOSTILE
    for c in COMMANDS
    if LONG or c == "analyze-all-outputs" or (c == "redact" and n in _SUITE_REDACT) or n == "ansi-and-markup"
]


@pytest.mark.parametrize(("name", "command"), _MATRIX)
def test_cli_on_hostile_file(name: str, command: str, tmp_path: Path) -> None:
    data = HOSTILE[name]
    if name == "directory":
        path = tmp_path / "adir"
        path.mkdir()
        (path / "x.jsonl").mkdir()  # a directory named like a trace
    elif name == "missing":
        path = tmp_path / "missing.jsonl"
    else:
        path = tmp_path / f"{name}.jsonl"
        path.write_bytes(data or b"")
    proc = _run_cli(COMMANDS[command](path, tmp_path), tmp_path)
    _cli_ok(proc, f"{name}/{command}")
    if command == "redact" and proc.returncode == 0:
        red = (tmp_path / "red.jsonl").read_bytes()
        assert red.count(b"\n") >= (data or b"").count(b"\n")
        assert b"HOSTILEKEY" not in red


def test_cli_real_entry_point_no_traceback(tmp_path: Path) -> None:
    """The installed console script (not `main()`), on the worst files."""
    exe = Path(sys.executable).with_name("rtrace")
    for name in ("random-binary", "deep-arrays-100k", "ansi-and-markup"):
        path = tmp_path / f"{name}.jsonl"
        path.write_bytes(HOSTILE[name] or b"")
        proc = subprocess.run([str(exe), "analyze", str(path)], capture_output=True, timeout=120)
        _cli_ok(proc, name)


@settings(FUZZ, max_examples=300 if LONG else 3)
@given(lines=st.lists(hostile_line(), min_size=1, max_size=12))
def test_cli_subprocess_on_random_files(lines: list[bytes]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "f.jsonl"
        path.write_bytes(b"\n".join([OK_LINE, *lines]))
        _cli_ok(_run_cli(["analyze", str(path), "--markdown", str(Path(tmp) / "r.md")], Path(tmp)), repr(lines)[:300])


# -- untrusted text in terminal and HTML output -------------------------------------------------------------------

ANSI = (
    "\x1b[31mRED\x1b[0m \x1b]8;;http://evil.example/\x1b\\link\x1b]8;;\x1b\\ \x1b]0;title\x07 "
    "\x1b[2J\x07\x08\x7f\x9b31m"
)
MARKUP = "[bold]bold[/bold] [link=http://evil.example]x[/link] :100: :smile:"
HTML = (
    "<script>alert(1)</script></textarea></script><img src=x onerror=alert(2)><!--"
    "\n```\n<script>alert(3)</script>\n````"
)
EVIL = ANSI + MARKUP + HTML


def _escaping_trace(path: Path) -> Path:
    evil_id = "item_" + EVIL
    lines = [
        {"rtrace": 1, "client": EVIL, "versions": {EVIL: EVIL}},
        {"t": 0.0, "dir": "meta", "conn": 1, "event": {"type": "connection.opened", "path": "/v1/realtime?x=" + EVIL}},
        {
            "t": 0.001,
            "dir": "server",
            "conn": 1,
            "event": {"type": "session.created", "session": {"instructions": EVIL}},
        },
        {
            "t": 0.01,
            "dir": "client",
            "conn": 1,
            "event": {
                "type": "conversation.item.create",
                "event_id": "evt_" + EVIL,
                "item": {
                    "id": evil_id,
                    "type": "message",
                    "role": "user",
                    "content": [{"type": "input_text", "text": EVIL}],
                },
            },
        },
        {
            "t": 0.02,
            "dir": "server",
            "conn": 1,
            "event": {
                "type": "conversation.item.added",
                "previous_item_id": None,
                "item": {"id": evil_id, "type": "message"},
            },
        },
        {
            "t": 0.03,
            "dir": "client",
            "conn": 1,
            "event": {
                "type": "conversation.item.create",
                "event_id": "evt_2",
                "item": {
                    "id": "out_" + EVIL,
                    "type": "function_call_output",
                    "call_id": "call_" + EVIL,
                    "output": EVIL,
                },
            },
        },
        {
            "t": 0.04,
            "dir": "server",
            "conn": 1,
            "event": {
                "type": "error",
                "error": {"type": "invalid_request_error", "code": EVIL, "message": EVIL, "event_id": "evt_2"},
            },
        },
        {"t": 0.05, "dir": "client", "conn": 1, "event": {"type": "conversation.item.delete", "item_id": evil_id}},
        {"t": 0.06, "dir": "client", "conn": 1, "event": {"type": "conversation.item.delete", "item_id": evil_id}},
        {"t": 0.07, "dir": "server", "conn": 1, "event": {"type": "x." + EVIL}},
        {"t": 9.0, "dir": "meta", "conn": 1, "event": {"type": "connection.closed", "reason": EVIL}},
    ]
    path.write_bytes(b"".join(orjson.dumps(x) + b"\n" for x in lines) + ANSI.encode() + b"\n")
    return path


def test_terminal_output_escapes_untrusted_text(tmp_path: Path) -> None:
    trace = _escaping_trace(tmp_path / "evil.jsonl")
    runs = [
        ["analyze", str(trace)],
        ["analyze", str(trace), "--fail-on", "never", "-o", str(tmp_path / "report.txt")],
        ["show", str(trace)],
        ["show", str(trace), "--at", "5"],
        ["show", str(trace), "--conn", "1"],
    ]
    findings = 0
    for args in runs:
        proc = _run_cli(args, tmp_path)
        _cli_ok(proc, " ".join(args[:1]))
        for stream in (proc.stdout, proc.stderr):
            assert b"\x1b" not in stream and b"\x07" not in stream and b"\x9b" not in stream.replace(b"\\x9b", b"")
            assert "💯".encode() not in stream and "😄".encode() not in stream
        findings += proc.stdout.count(b"RT1")
    saved = (tmp_path / "report.txt").read_bytes()
    assert b"\x1b" not in saved and b"\\x1b[31m" in saved
    assert findings >= 2, "the hostile trace should produce findings that quote its ids"


def test_html_report_has_no_injected_markup(tmp_path: Path) -> None:
    trace = _escaping_trace(tmp_path / "evil.jsonl")
    benign = tmp_path / "benign.jsonl"
    benign.write_bytes(OK_LINE + b"\n")
    for src, out in ((trace, "evil.html"), (benign, "benign.html")):
        proc = _run_cli(["report", str(src), "-o", str(tmp_path / out)], tmp_path)
        _cli_ok(proc, out)
    html = (tmp_path / "evil.html").read_text()
    base = (tmp_path / "benign.html").read_text()
    # The text is kept (JSON-escaped in the embedded data, `<` as \u003c), never as markup.
    for needle in ("<script>alert(1)", "<img src=x", "\x1b", "\x07"):
        assert needle not in html, needle
    for tag in ("<script", "</script", "</textarea", "<!--", "<img", "<iframe"):
        assert html.lower().count(tag) == base.lower().count(tag), tag
    md = _run_cli(["report", str(trace), "-f", "markdown"], tmp_path).stdout.decode()
    assert "\x1b" not in md
    assert "<script" not in outside_code(md), "raw HTML in the Markdown report outside code"


# -- one bad field never discards a trace (`make harden` class 2) --------------------------------------------------


def _catalog_report(lines: list[dict[str, Any]]) -> Any:
    from rtrace.engine.fold import analyze_reader

    return analyze_reader(TraceReader(io.BytesIO(dumps_lines(lines)), "catalog.jsonl"))


def _expected(event_type: str, path: tuple[Any, ...]) -> frozenset[type] | None:
    """The JSON types `reducer.step` reads the field at `path` of `event_type` with (`reducer.FIELDS`), or None when
    it does not read that field."""
    from rtrace.core.fields import FIELDS

    spec: Any = FIELDS.get(event_type)
    types = None
    for p in path:
        if spec is None:
            return None
        key = "*" if isinstance(p, int) else p
        entry = next((e for e in spec if e[0] == key), None)
        if entry is None:
            return None
        _, types, spec = entry
    return types


def test_every_field_of_every_catalog_event_with_a_wrong_type() -> None:
    """Each field of each event of a trace holding every catalogue type, set to values of other JSON types: the trace
    is always read whole, no rule fails, and a field the reducer reads is a problem at its line and column."""
    baseline = _catalog_report(CATALOG_LINES)
    assert baseline.problems == [] and not baseline.failed_rules
    cases = 0
    for k, (index, path, wrong) in enumerate(mutations()):
        if k % 3 and not LONG:
            continue  # the suite takes every third; `make harden` and the long profile take them all
        cases += 1
        lines = mutated(CATALOG_LINES, index, path, wrong)
        report = _catalog_report(lines)
        where = f"line {index + 1} {CATALOG_LINES[index]['event']['type']} {path} = {wrong!r}"
        assert report.unreadable is None and report.events == len(CATALOG_LINES), where
        assert not report.failed_rules, (where, report.problems[:1])
        expected = _expected(CATALOG_LINES[index]["event"]["type"], path)
        if expected is not None and type(wrong) not in expected:
            dotted = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path).lstrip(".")
            found = [p for p in report.problems if p.line == index + 1 and f"`{dotted}`" in p.message]
            assert found, (where, report.problems)
            line = orjson.dumps(lines[index]).decode()
            assert line[found[0].col - 1 :].startswith(orjson.dumps(wrong).decode()[:1]), (where, found[0])
    assert cases >= 1000


@FUZZ
@given(data=st.data())
def test_a_wrong_value_in_any_catalog_field_keeps_every_report(data: st.DataObject) -> None:
    """Arbitrary JSON in one field of one catalogue event: every renderer runs, the other findings stand."""
    index = data.draw(st.integers(0, len(CATALOG_LINES) - 1))
    paths = list(field_paths(CATALOG_LINES[index]["event"]))
    if not paths:
        return
    path = data.draw(st.sampled_from(paths))
    value = data.draw(_JSON)
    lines = mutated(CATALOG_LINES, index, path, value)
    raw = dumps_lines(lines) if all(_encodable(x) for x in lines) else None
    if raw is None:
        return
    with bounded(), tempfile.TemporaryDirectory() as tmp:
        records, _ = read_all(raw)
        render_everything(records, Path(tmp), raw)
        assert not _catalog_report(lines).failed_rules


def _encodable(line: Any) -> bool:
    try:
        orjson.dumps(line)
    except orjson.JSONEncodeError:
        return False
    return True


def test_cli_one_bad_field_is_a_problem_not_an_unreadable_trace(tmp_path: Path) -> None:
    """The case hardening found: `error.code` an array made RT120 raise, and `analyze`/`report` called the trace
    unreadable (exit 3, every finding lost)."""
    lines = [
        {"t": 0.0, "dir": "meta", "conn": 1, "event": {"type": "connection.opened", "path": "/v1/realtime"}},
        {"t": 0.01, "dir": "server", "conn": 1, "event": {"type": "session.created", "session": {}}},
        {
            "t": 0.02,
            "dir": "client",
            "conn": 1,
            "event": {"type": "conversation.item.create", "event_id": "e1", "item": {"id": "a", "type": "message"}},
        },
        {
            "t": 0.03,
            "dir": "server",
            "conn": 1,
            "event": {"type": "error", "error": {"code": ["x"], "message": "bad", "event_id": "e1"}},
        },
    ]
    trace = tmp_path / "code-list.jsonl"
    trace.write_bytes(dumps_lines(lines))
    proc = _run_cli(["analyze", str(trace), "-f", "json"], tmp_path)
    _cli_ok(proc, "analyze code-list")
    assert proc.returncode in (0, 1), proc.stderr
    report = orjson.loads(proc.stdout)["traces"][0]
    assert report["unreadable"] is None and report["failed_rules"] == [] and report["findings"]
    col = orjson.dumps(lines[3]).decode().index('["x"]') + 1
    assert {"line": 4, "col": col} == {k: report["problems"][0][k] for k in ("line", "col")}
    assert "`error.code` of error is an array, expected a string" in report["problems"][0]["message"]
    md = _run_cli(["report", str(trace)], tmp_path)
    assert md.returncode == 0 and b"RT112" in md.stdout and b"Unreadable" not in md.stdout, md.stderr


# -- no command destroys its input (`make harden` class 3) ---------------------------------------------------------

SAMPLE = Path(__file__).resolve().parent.parent / "sample_traces" / "real" / "tool-output-race.livekit-1.8.8.jsonl"
#: Every command with an output, that output given as the input (`X`), and through a symlink to it (`L`).
SAME_AS_INPUT = {
    "convert": ["convert", "X", "-o", "X"],
    "convert-link": ["convert", "X", "-o", "L"],
    "replay": ["replay", "X", "-o", "X", "--timeout", "1s"],
    "redact": ["redact", "X", "-o", "X"],
    "redact-link": ["redact", "L", "-o", "X"],
    "analyze-o": ["analyze", "X", "-o", "X"],
    "analyze-json": ["analyze", "X", "--json", "X"],
    "analyze-html": ["analyze", "X", "--html", "L"],
    "analyze-markdown-dir": ["analyze", "D", "--markdown", "X"],
    "report": ["report", "X", "-o", "L", "-f", "markdown"],
    "serve": ["serve", "--from", "X", "--record", "X"],
}


@pytest.mark.parametrize("name", sorted(SAME_AS_INPUT))
def test_an_output_that_is_an_input_is_refused(name: str, tmp_path: Path) -> None:
    folder = tmp_path / "traces"
    folder.mkdir()
    trace = folder / "x.jsonl"
    trace.write_bytes(SAMPLE.read_bytes())
    (tmp_path / "l.jsonl").symlink_to(trace)
    names = {"X": str(trace), "L": str(tmp_path / "l.jsonl"), "D": str(folder)}
    proc = _run_cli([names.get(a, a) for a in SAME_AS_INPUT[name]], tmp_path)
    assert proc.returncode == 2, (name, proc.returncode, proc.stderr)
    assert b"is the input" in proc.stderr and b"Traceback" not in proc.stderr, proc.stderr
    assert trace.read_bytes() == SAMPLE.read_bytes()
    assert sorted(p.name for p in folder.iterdir()) == ["x.jsonl"]


@pytest.mark.parametrize("command", ["convert", "redact"])
def test_an_existing_output_is_not_replaced_by_nothing(command: str, tmp_path: Path) -> None:
    empty, out = tmp_path / "empty.jsonl", tmp_path / "out.jsonl"
    empty.write_bytes(b"")
    out.write_bytes(b"an earlier result\n")
    proc = _run_cli([command, str(empty), "-o", str(out)], tmp_path)
    assert proc.returncode == 3 and b"is not written" in proc.stderr, proc.stderr
    assert out.read_bytes() == b"an earlier result\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty.jsonl", "out.jsonl"]


@pytest.mark.parametrize("command", ["record", "serve"])
def test_a_recorder_that_records_nothing_keeps_an_existing_trace(command: str, tmp_path: Path) -> None:
    trace = tmp_path / "rec.jsonl"
    trace.write_bytes(SAMPLE.read_bytes())
    args = ["record", "--upstream", "ws://127.0.0.1:9/v1", "-o"] if command == "record" else ["serve", "--record"]
    proc = subprocess.Popen([*RTRACE, *args, str(trace)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path)
    try:
        assert proc.stdout is not None and b"listening on" in proc.stdout.readline()
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=15)
    assert proc.returncode == 0 and b"Traceback" not in err, err
    assert trace.read_bytes() == SAMPLE.read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rec.jsonl"]


# -- no hang on special files (`make harden` class 7) ---------------------------------------------------------------

#: Every command that reads a trace by name, given `F`.
READERS = {
    "analyze": ["analyze", "F"],
    "show": ["show", "F"],
    "report": ["report", "F"],
    "redact": ["redact", "F"],
    "convert": ["convert", "F", "-o", "out.jsonl"],
    "replay": ["replay", "F", "--timeout", "1s"],
}


def _run_bounded(
    args: list[str], cwd: Path, stdin: Any = None, seconds: float = 30
) -> subprocess.CompletedProcess[bytes]:
    """`rtrace ARGS`, killed (and the test failed) if it takes longer than `seconds`: a hang is a failure."""
    try:
        return subprocess.run([*RTRACE, *args], capture_output=True, timeout=seconds, cwd=cwd, stdin=stdin)
    except subprocess.TimeoutExpired:
        pytest.fail(f"rtrace {' '.join(args)} hung (over {seconds} s)")


@pytest.mark.parametrize("special", ["fifo", "/dev/zero"])
@pytest.mark.parametrize("command", sorted(READERS))
def test_special_files_are_refused_by_name(command: str, special: str, tmp_path: Path) -> None:
    path = special
    if special == "fifo":
        path = str(tmp_path / "trace.jsonl")
        os.mkfifo(path)  # nobody writes to it: opening it for reading would block forever
    proc = _run_bounded([path if a == "F" else a for a in READERS[command]], tmp_path)
    assert proc.returncode == 3, (proc.returncode, proc.stderr)
    said = b" ".join((proc.stdout + proc.stderr).split())  # as read, whatever the 120 columns wrapped
    assert b"not a regular file" in said and b"--allow-special-files" in said
    assert b"Traceback" not in proc.stderr and not (tmp_path / "out.jsonl").exists()


@pytest.mark.parametrize("how", ["allowed", "stdin"])
@pytest.mark.parametrize("command", ["analyze", "show", "report", "redact"])
def test_a_line_end_is_looked_for_only_so_far(command: str, how: str, tmp_path: Path) -> None:
    """A line that never ends (text with no newline, forever), from a FIFO allowed by name or as stdin:
    `--max-line-bytes` bounds the search. `/dev/zero` is binary data: not a text trace, said at once."""
    endless = subprocess.Popen(["sh", "-c", "yes a | tr -d '\\n'"], stdout=subprocess.PIPE)
    try:
        fifo = tmp_path / "endless.jsonl"
        if how == "allowed":
            os.mkfifo(fifo)
            feeder = subprocess.Popen(["sh", "-c", f"cat > '{fifo}'"], stdin=endless.stdout)
        args = [command, str(fifo), "--allow-special-files"] if how == "allowed" else [command, "-"]
        if command != "report":
            args += ["--max-line-bytes", "4096"]
        proc = _run_bounded(args, tmp_path, stdin=endless.stdout if how == "stdin" else subprocess.DEVNULL, seconds=60)
    finally:
        endless.kill()
        endless.wait(10)
        if how == "allowed":
            feeder.kill()
            feeder.wait(10)
    assert proc.returncode in (0, 3), (proc.returncode, proc.stderr[-500:])
    said = b" ".join((proc.stdout + proc.stderr).split())  # as read, whatever the terminal width wrapped
    if command == "report":  # the Markdown report counts input problems, `analyze` lists them
        assert b"input problems: 1" in said
    else:
        assert b"no line end" in said and b"the rest of the input is not read" in said, said[-300:]
    assert b"Traceback" not in proc.stderr
    zero = _run_bounded([command, "/dev/zero", "--allow-special-files"], tmp_path, stdin=subprocess.DEVNULL)
    assert zero.returncode == 3 and b"not a text trace (binary data: a NUL byte at byte 1)" in b" ".join(
        (zero.stdout + zero.stderr).split()
    )


def test_a_fifo_is_read_when_allowed(tmp_path: Path) -> None:
    fifo = tmp_path / "trace.jsonl"
    os.mkfifo(fifo)
    proc = subprocess.Popen(
        [*RTRACE, "analyze", str(fifo), "--allow-special-files", "-f", "json"], stdout=subprocess.PIPE
    )
    with open(fifo, "wb") as w:
        w.write(SAMPLE.read_bytes())
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 1 and orjson.loads(out)["traces"][0]["events"] == 76


# -- user input in messages is shown, never obeyed (`make harden` class 6) -----------------------------------------

HOSTILE_NAME = "\x1b[31mred\x1b]0;title\x07\x9b2J\u202eevil\u2028x\x7f"
#: Every command, with `H` a hostile path to a trace, `M` a hostile path that does not exist, `O` a hostile output.
HOSTILE_PATH_RUNS = {
    "analyze": ["analyze", "H"],
    "analyze-missing": ["analyze", "M"],
    "analyze-json-missing": ["analyze", "-f", "json", "M"],
    "analyze-outputs": ["analyze", "H", "--html", "O.html", "--markdown", "O.md", "--sarif", "O.sarif", "-o", "O.txt"],
    "analyze-output-dir-missing": ["analyze", "H", "--json", "M/x.json"],
    "show": ["show", "H"],
    "show-missing": ["show", "M"],
    "report": ["report", "H"],
    "report-missing": ["report", "M"],
    "report-output": ["report", "H", "-o", "O.html"],
    "redact": ["redact", "H", "-o", "O.jsonl"],
    "redact-missing": ["redact", "M"],
    "convert": ["convert", "H", "-o", "O.jsonl"],
    "convert-missing": ["convert", "M", "-o", "O.jsonl"],
    "replay": ["replay", "H", "-o", "O.jsonl", "--timeout", "2s"],
    "replay-missing": ["replay", "M"],
    "rules": ["rules", "H"],
    "serve-from-missing": ["serve", "--from", "M"],
    "bad-option-value": ["analyze", "--format", "H", "H"],
    "sweep-out": ["sweep", "--runs", "1", "--latency", "0", "--out", "O-dir", "--timeout", "20s", "--", "true"],
}
_RAW_CONTROL = re.compile(rb"[\x00-\x08\x0b-\x1f\x7f]|\xc2[\x80-\x9f]|\xe2\x80[\xa8\xa9\xaa-\xae]|\xe2\x81[\xa6-\xa9]")


def _no_raw_control(proc: subprocess.CompletedProcess[bytes], name: str) -> None:
    for stream in (proc.stdout, proc.stderr):
        found = _RAW_CONTROL.search(stream)
        assert found is None, (
            f"{name}: raw {found.group()!r} in {stream[max(0, found.start() - 60) : found.end() + 20]!r}"
        )


@pytest.mark.parametrize("name", sorted(HOSTILE_PATH_RUNS))
def test_every_command_shows_a_hostile_path_escaped(name: str, tmp_path: Path) -> None:
    trace = tmp_path / f"{HOSTILE_NAME}.jsonl"
    trace.write_bytes(SAMPLE.read_bytes())
    values = {"H": str(trace), "M": str(tmp_path / f"no{HOSTILE_NAME}.jsonl"), "O": str(tmp_path / f"o{HOSTILE_NAME}")}
    args = []
    for a in HOSTILE_PATH_RUNS[name]:
        for k, v in values.items():
            if a == k or a.startswith(k + ".") or a.startswith(k + "/") or a.startswith(k + "-"):
                a = v + a[1:]
        args.append(a)
    proc = _run_cli(args, tmp_path)
    assert b"Traceback" not in proc.stderr and b"internal error" not in proc.stderr, proc.stderr
    _no_raw_control(proc, name)
    if name.endswith("-missing") and "json" not in name:  # the message names the path, escaped
        assert b"\\x1b[31mred" in proc.stdout + proc.stderr, (proc.stdout[-300:], proc.stderr)


@pytest.mark.parametrize("command", ["record", "serve"])
def test_recorders_announce_a_hostile_output_escaped(command: str, tmp_path: Path) -> None:
    out = tmp_path / f"{HOSTILE_NAME}.jsonl"
    args = ["record", "--upstream", "ws://127.0.0.1:9/v1", "-o"] if command == "record" else ["serve", "--record"]
    proc = subprocess.Popen([*RTRACE, *args, str(out)], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert proc.stdout is not None
        lines = [proc.stdout.readline()]
        while lines[-1] and b"Ctrl-C" not in lines[-1]:  # the whole announcement: communicate() skips what is
            lines.append(proc.stdout.readline())  # left in this reader's buffer
    finally:
        proc.send_signal(signal.SIGTERM)
        rest, err = proc.communicate(timeout=15)
    done = subprocess.CompletedProcess(args, proc.returncode, b"".join(lines) + rest, err)
    _no_raw_control(done, command)
    assert b"recording to" in done.stdout and b"\\x1b[31mred" in done.stdout, done.stdout


# -- planted secrets survive no redact, report or message (`make harden` class 4) -----------------------------------


@pytest.mark.parametrize("flags", [[], ["--user-text", "--audio", "--tool-output"]])
def test_no_planted_secret_survives_redact(flags: list[str], tmp_path: Path) -> None:
    from .secret_corpus import PLANTS, corpus_lines, survivors

    assert len(PLANTS) >= 80 and len({p.kind for p in PLANTS}) >= 10
    trace, out = tmp_path / "planted.jsonl", tmp_path / "clean.jsonl"
    trace.write_bytes(dumps_lines(corpus_lines()))
    assert len(survivors(trace.read_bytes())) == len(PLANTS)  # every needle is there to be found
    proc = _run_cli(["redact", str(trace), "-o", str(out), *flags], tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert survivors(out.read_bytes()) == []
    assert survivors(proc.stdout + proc.stderr) == []
    assert out.read_bytes().count(b"\n") == trace.read_bytes().count(b"\n")
    # To stdout too (through a spool, so split deltas are rewritten as in a file).
    piped = _run_cli(["redact", str(trace), *flags], tmp_path)
    assert piped.returncode == 0 and survivors(piped.stdout) == []
    if not flags:  # (text tags are keyed per run)
        assert piped.stdout == out.read_bytes()


def test_no_planted_secret_reaches_a_report_or_a_message(tmp_path: Path) -> None:
    from .secret_corpus import corpus_lines, survivors

    trace = tmp_path / "planted.jsonl"
    trace.write_bytes(dumps_lines(corpus_lines()))
    runs = {
        "analyze": ["analyze", str(trace)],
        "analyze-json": ["analyze", str(trace), "-f", "json"],
        "show": ["show", str(trace)],
        "show-conn": ["show", str(trace), "--conn", "60"],
        "report-md": ["report", str(trace)],
        "side-outputs": ["analyze", str(trace)]
        + [f"--{k}={tmp_path / ('r.' + k)}" for k in ("html", "sarif", "junit", "markdown")],
        "convert": ["convert", str(trace), "-o", str(tmp_path / "converted.jsonl")],
    }
    for name, args in runs.items():
        proc = _run_cli(args, tmp_path)
        assert b"Traceback" not in proc.stderr, proc.stderr
        assert survivors(proc.stdout + proc.stderr) == [], name
    for f in tmp_path.iterdir():
        if f.name != "planted.jsonl":
            assert survivors(f.read_bytes()) == [], f.name


# -- side inputs (the sample the suite runs; `make harden` runs every case of tests/side_inputs.py) --------


def _side_case_holds(case: Any, tmp_path: Path) -> None:
    args = case.write(tmp_path)
    proc = _run_bounded(args, tmp_path, stdin=subprocess.DEVNULL)
    said = (proc.stdout + proc.stderr).decode("utf-8", "replace")
    assert case.held(proc.returncode, said), (case.name, proc.returncode, said[-600:])


def _sample(cases: Any, names: tuple[str, ...]) -> list[Any]:
    picked = [c for c in cases if c.name in names]
    assert len(picked) == len(names), [c.name for c in picked]
    return picked


@pytest.mark.parametrize(
    "case",
    _sample(
        side_inputs.depth_cases((1000,)),
        (
            "rtrace.toml select, arrays 1000 deep",
            "pyproject, another tool's table, inline tables 1000 deep",
            "--script, mixed 1000 deep",
            "--baseline, objects 1000 deep",
            "--tool arguments, objects 1000 deep",
            "--script dotted key 1000 deep",
            "hunt --schedule, arrays 1000 deep",
        ),
    ),
    ids=lambda c: c.name,
)
def test_a_side_input_nested_too_deep_is_a_usage_error_at_its_line(case: Any, tmp_path: Path) -> None:
    """These ended in `internal error: RecursionError` (exit 70); now exit 2 with `file:line:col`."""
    _side_case_holds(case, tmp_path)


@pytest.mark.parametrize(
    "case",
    _sample(
        side_inputs.regex_cases(), ("user_regex 'a{1000000000}' (13 chars)", f"user_regex {'(' * 40!r} (101 chars)")
    ),
    ids=lambda c: c.name,
)
def test_a_scripts_regular_expression_is_checked_when_read(case: Any, tmp_path: Path) -> None:
    """A huge repetition count (OverflowError, or a compile that never ends) and deep nesting
    (RecursionError) were internal errors; they are refused with the reason when the script is read."""
    _side_case_holds(case, tmp_path)


def test_a_catastrophic_pattern_is_searched_in_bounded_time() -> None:
    import time

    from rtrace.core.inputs import PATTERN_SECONDS, pattern_search, user_pattern

    for pattern, text in side_inputs.CATASTROPHIC:
        compiled = user_pattern(pattern)
        with bounded(5):
            started = time.perf_counter()
            found = pattern_search(compiled, text)
            took = time.perf_counter() - started
        assert found in (True, False, None) and took < PATTERN_SECONDS * 40 + 1, (pattern, took)


@pytest.mark.parametrize(
    "case",
    _sample(
        side_inputs.special_cases(),
        (
            "--baseline a FIFO",
            "settings' baseline /dev/zero",
            "--config a symlink to a FIFO",
            "--script /dev/zero",
            "hunt --schedule a FIFO",
        ),
    ),
    ids=lambda c: c.name,
)
def test_a_special_side_input_is_refused_by_name(case: Any, tmp_path: Path) -> None:
    """A FIFO baseline hung, /dev/zero ended in MemoryError (exit 70)."""
    _side_case_holds(case, tmp_path)


@pytest.mark.parametrize(
    "what", ["an 80 KB banner line, utf-8", "none, utf-16", "a 1,500-frame stack trace, utf-8-sig"]
)
def test_a_livekit_log_is_found_past_a_preamble_and_in_utf16(what: str, tmp_path: Path) -> None:
    """A log with an 80 KB preamble, or written as UTF-16, was `no usable event` (exit 3)."""
    from rtrace.engine.parallel import analyze_file

    variants = [(log, v, data) for log, v, data in side_inputs.log_variants() if v == what and "race-json" in log]
    assert len(variants) == 1
    log, _, data = variants[0]
    path = tmp_path / "agent.log"
    path.write_bytes(data)
    plain = analyze_file(str(side_inputs.LOGS / log), Config(), RULES_ALL, 1 << 24)
    got = analyze_file(str(path), Config(), RULES_ALL, 1 << 24)
    assert got.unreadable is None and plain.findings
    def what(report: Any) -> list[tuple[str, str]]:  # the preamble moves line numbers, nothing else
        return [(f.rule, re.sub(r"line \d+", "line N", f.message)) for f in report.findings]

    assert what(got) == what(plain)


# -- messages that point the right way ---------------------------------------------------------------------------


def test_every_install_hint_names_this_distribution_and_an_extra_it_declares() -> None:
    """The `.zst` hints named `rtrace[zstd]`, the unrelated package of that name on PyPI: every `pip install` of
    rtrace a message, a docstring, README or the docs suggest installs `rtrace-cli`, with extras pyproject declares."""
    from rtrace.engine.settings import tomllib

    root = Path(__file__).resolve().parent.parent
    extras = set(tomllib.loads((root / "pyproject.toml").read_text())["project"]["optional-dependencies"])
    paths = [*sorted((root / "rtrace").rglob("*.py")), root / "README.md", *sorted((root / "docs").glob("*.md"))]
    hints = []
    for path in paths:
        text = path.read_text(encoding="utf-8")
        hints += [(path, m) for m in re.findall(r"pip install '?(rtrace[A-Za-z0-9_.-]*)(?:\[([^\]]*)\])?", text)]
        assert "rtrace[" not in text, path
    assert len(hints) >= 5 and (root / "rtrace" / "core" / "inputs.py", ("rtrace-cli", "zstd")) in hints  # the opener
    for path, (name, wanted) in hints:
        assert name == "rtrace-cli", f"{path}: `pip install {name}` is not this distribution (rtrace-cli)"
        assert set(wanted.split(",")) - {""} <= extras, (path, wanted)
