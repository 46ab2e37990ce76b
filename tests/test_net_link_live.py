"""Live findings beside a recorder (`rtrace.net.link.live.watch`): `serve` folds what it records as it passes and prints
each finding while the session goes on; a temporary trace is kept only when it has findings."""

from __future__ import annotations

import asyncio
import dataclasses
import io
import json
import time
from pathlib import Path
from typing import Any

from websockets.asyncio.client import connect

from rtrace.core.loader import TraceReader
from rtrace.core.writer import Tap
from rtrace.engine.fold import analyze_path
from rtrace.net.link.live import ConnectionLog, watch
from rtrace.net.link.server import ServerOptions, run_server

from .conftest import REAL

REAL_188 = REAL / "tool-output-race.livekit-1.8.8.jsonl"
CALL = {"type": "function_call", "id": "item_call", "call_id": "c1", "name": "get_weather", "arguments": "{}"}
OUTPUT = {"type": "function_call_output", "id": "item_out", "call_id": "c1", "output": "sunny"}


async def until(ws: Any, kind: str) -> dict[str, Any]:
    while True:
        event = json.loads(await ws.recv())
        if event["type"] == kind:
            return event


async def delete_tool_output(url: str, err: io.StringIO | None = None, seen: list[str] | None = None) -> None:
    """Creates a call and its output, deletes the output; then, with the socket still open, waits for the live
    line (the finding must be told while the session goes on)."""
    async with connect(url) as ws:
        await until(ws, "session.created")
        for item in (CALL, OUTPUT):
            await ws.send(json.dumps({"type": "conversation.item.create", "item": item}))
            await until(ws, "conversation.item.added")
        await ws.send(json.dumps({"type": "conversation.item.delete", "item_id": "item_out"}))
        await until(ws, "conversation.item.deleted")
        if err is None or seen is None:
            return
        deadline = time.monotonic() + 5
        while "RT101" not in err.getvalue() and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        seen.append(err.getvalue())


def serve(options: ServerOptions, client: Any) -> Any:
    def run(path: str, tap: Tap) -> None:
        async def main() -> None:
            async with run_server(dataclasses.replace(options, record=path, tap=tap)) as srv:
                await client(f"{srv.url}/realtime")

        asyncio.run(main())

    return run


def test_a_finding_is_printed_while_the_session_goes_on_and_matches_the_report(tmp_path: Path) -> None:
    err = io.StringIO()
    seen: list[str] = []
    trace = tmp_path / "served.jsonl"
    watched = watch(serve(ServerOptions(latency=0.01), lambda url: delete_tool_output(url, err, seen)), trace,
                    True, err)  # fmt: skip
    # told before the client closed its socket
    assert "error RT101 deleted-function-call-output conn 1 line " in seen[0]
    assert watched.trace == str(trace)
    after = analyze_path(trace)
    assert [(f.rule, f.at_line, f.message) for f in watched.report.findings] == [
        (f.rule, f.at_line, f.message) for f in after.findings
    ]
    (rt101,) = [f for f in after.findings if f.rule == "RT101"]
    assert f"RT101 deleted-function-call-output conn 1 line {rt101.at_line}: {rt101.message}" in err.getvalue()


def test_a_temporary_trace_is_kept_only_with_findings() -> None:
    async def clean(url: str) -> None:
        async with connect(url) as ws:
            await until(ws, "session.created")

    err = io.StringIO()
    quiet = watch(serve(ServerOptions(), clean), None, True, err)
    assert quiet.trace is None and quiet.report.findings == [] and err.getvalue() == ""
    seen: list[str] = []
    found = watch(serve(ServerOptions(), lambda url: delete_tool_output(url, err, seen)), None, True, err)
    assert found.trace is not None and Path(found.trace).exists()
    assert "RT101" in {f.rule for f in analyze_path(found.trace).findings}
    Path(found.trace).unlink()


def test_without_live_nothing_is_printed_but_the_report_is_made() -> None:
    err = io.StringIO()
    watched = watch(serve(ServerOptions(), delete_tool_output), None, False, err)
    assert err.getvalue() == ""
    assert "RT101" in {f.rule for f in watched.report.findings}
    assert watched.trace is not None
    Path(watched.trace).unlink()


def start(argv: list[str]) -> tuple[Any, str]:
    """`python -m rtrace.cli ARGV` in a subprocess; its websocket base URL once it listens."""
    import subprocess
    import sys

    proc = subprocess.Popen(
        [sys.executable, "-m", "rtrace.cli", *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    first = proc.stdout.readline()
    assert " listening on ws://127.0.0.1:" in first, first + proc.stderr.read()  # type: ignore[union-attr]
    return proc, first.split(" listening on ")[1].split()[0].rstrip(",")


def stop(proc: Any) -> tuple[int, str, str]:
    import signal

    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=20)
    return proc.returncode, out, err


def test_serve_exit_with_findings_reports_at_sigterm_and_exits_1_on_an_error(tmp_path: Path) -> None:
    proc, url = start(["serve", "--latency", "5ms", "--exit-with-findings", "--live"])
    try:
        asyncio.run(delete_tool_output(f"{url}/realtime"))
        time.sleep(0.2)
    finally:
        code, out, err = stop(proc)
    assert code == 1, (out, err)
    # the live line on stderr, the terminal report and the kept trace on stdout
    assert "error RT101 deleted-function-call-output conn 1 line " in err
    assert "error   RT101 deleted-function-call-output  conn 1" in out
    kept = out.split("rtrace serve: trace kept at ")[1].split()[0]
    assert "RT101" in {f.rule for f in analyze_path(kept).findings}
    Path(kept).unlink()


def test_serve_exit_with_findings_exits_0_on_a_clean_session_and_honours_fail_on(tmp_path: Path) -> None:
    async def clean(url: str) -> None:
        async with connect(url) as ws:
            await until(ws, "session.created")
            await ws.send(json.dumps({"type": "conversation.item.create", "item": CALL}))
            await until(ws, "conversation.item.added")

    trace = tmp_path / "clean.jsonl"
    proc, url = start(["serve", "--exit-with-findings", "--record", str(trace), "--no-live"])
    try:
        asyncio.run(clean(f"{url}/realtime"))
    finally:
        code, out, err = stop(proc)
    # a call left without output is a warning (RT103): not an error
    assert code == 0, (out, err)
    assert "warning RT103 unanswered-function-call" in out and "warning RT103" not in err  # --no-live: not told live
    proc, url = start(["serve", "--exit-with-findings", "--fail-on", "warning"])
    try:
        asyncio.run(clean(f"{url}/realtime"))
    finally:
        code, out, _ = stop(proc)
    assert code == 1
    Path(out.split("trace kept at ")[1].split()[0]).unlink()


def test_record_live_prints_the_finding_of_traffic_passing_to_the_upstream_and_logs_each_connection(
    tmp_path: Path,
) -> None:
    trace = tmp_path / "recorded.jsonl"

    async def main() -> tuple[int, str]:
        async with run_server(ServerOptions()) as upstream:
            proc, url = await asyncio.to_thread(
                start, ["record", "--upstream", f"{upstream.url}/realtime", "-o", str(trace), "--live"]
            )
            try:
                await delete_tool_output(f"{url}/realtime?model=m1")
                await asyncio.sleep(0.2)
            finally:
                code, _, err = await asyncio.to_thread(stop, proc)
            return code, err

    code, err = asyncio.run(main())
    assert code == 0
    assert "rtrace record: conn 1 opened: /v1/realtime?model=m1 (model m1)" in err
    assert "rtrace record: conn 1 closed: " in err and "3 client / " in err
    assert err.splitlines()[-1].endswith(f"trace in {trace}") and "RT101 x1" in err.splitlines()[-1]
    (rt101,) = [f for f in analyze_path(trace).findings if f.rule == "RT101"]
    assert f"error RT101 deleted-function-call-output conn 1 line {rt101.at_line}: {rt101.message}" in err


def test_the_connection_log_tells_each_connection_and_a_summary() -> None:
    said: list[str] = []
    log = ConnectionLog("rtrace serve", said.append)
    lines = [
        b'{"rtrace":1,"recorder":"rtrace serve"}',
        b'{"t":0.0,"dir":"meta","conn":1,"event":{"type":"connection.opened","path":"/v1/realtime?model=gpt-x"}}',
        b'{"t":0.1,"dir":"server","conn":1,"event":{"type":"session.created"}}',
        b'{"t":0.2,"dir":"client","conn":1,"event":{"type":"response.create"}}',
        b'{"t":0.3,"dir":"server","conn":1,"event":{"type":"response.created"}}',
        b'{"t":0.4,"dir":"meta","conn":2,"event":{"type":"connection.opened","path":"/v1"}}',
        b'{"t":0.5,"dir":"meta","conn":1,"event":{"type":"connection.closed","by":"client","code":1000}}',
    ]
    finding = analyze_path(REAL_188).findings[0]
    with TraceReader(io.BytesIO(b"\n".join(lines) + b"\n"), "t.jsonl") as reader:  # type: ignore[arg-type]
        for row in reader.rows():
            if row[1] == 7:  # a finding the close's line made certain is counted on its line
                log.finding(dataclasses.replace(finding, conn=1), False)
            log.row(row)
    assert said == [
        "rtrace serve: conn 1 opened: /v1/realtime?model=gpt-x (model gpt-x)",
        "rtrace serve: conn 2 opened: /v1 (no model in the URL)",
        f"rtrace serve: conn 1 closed: code 1000 (by the client), 1 client / 2 server events, findings so far: 1 "
        f"({finding.rule})",
    ]
    assert log.summary("out.jsonl", False) == (
        f"rtrace serve: stopped: 2 connections, 1 client / 2 server events, findings: {finding.rule} x1; "
        "trace in out.jsonl"
    )
    assert log.summary(None, True).endswith("no trace kept (no finding; --record FILE keeps one)")


def test_serve_logs_each_connection_and_a_summary_on_sigterm(tmp_path: Path) -> None:
    trace = tmp_path / "t.jsonl"
    proc, url = start(["serve", "--record", str(trace), "--no-live", "--latency", "5ms", "--jitter", "1ms"])
    try:
        asyncio.run(delete_tool_output(f"{url}/realtime?model=gpt-realtime"))
        time.sleep(0.3)
    finally:
        code, _, err = stop(proc)
    assert code == 0, err
    lines = err.splitlines()
    assert "rtrace serve: conn 1 opened: /v1/realtime?model=gpt-realtime (model gpt-realtime)" in lines
    (closed,) = [line for line in lines if line.startswith("rtrace serve: conn 1 closed: ")]
    assert "3 client / " in closed and "findings so far: 1 (RT101)" in closed
    assert lines[-1].startswith("rtrace serve: stopped: 1 connection, 3 client / ")
    assert "RT101 x1" in lines[-1] and lines[-1].endswith(f"trace in {trace}")
