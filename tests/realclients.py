"""Real clients against `rtrace serve`, for the end-to-end modules (tests/test_e2e_<client>.py): one run is a
client's driver (tests/e2e/, in the client's own environment, made by `make e2e-envs`) against a fake endpoint in
this process, on 127.0.0.1 and a free port, recording to a file; then what the trace shows on the wire and what
`rtrace analyze` reports about it.

Every driver runs the same turn (tests/e2e/scenario_common.py): one user text, a call of the test's own tool
`TOOL` (schema `{order_id: string}`), its output, an answer, and prints one summary line (`rtrace.scenario/1`).
The faults are the server's: a close while the tool runs (`close_after` = the server events of the client's own
healthy run up to the call's `response.done`), or a drop when the tool output's create arrives (`drop_on`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from rtrace.engine.fold import TraceReport, analyze_path
from rtrace.net.fake.endpoint import EndpointOptions
from rtrace.net.faults.flags import Faults
from rtrace.net.faults.script import Schedule
from rtrace.net.link import tls
from rtrace.net.link.server import RealtimeServer, ServerOptions, run_server

from .conftest import ROOT, client_node, client_python

E2E = ROOT / "tests" / "e2e"
LATENCY = 0.05
#: The test's own tool, and the arguments the fake model calls it with (`EndpointOptions.tool`).
TOOL = "lookup_order"
TOOL_ARGUMENTS = {"order_id": "A-1234"}
#: What the drivers' tool answers (its output, quoted back by the fake model's answer).
TOOL_STATUS = "shipped"
#: The drop of the output create (`--drop-on conversation.item.create:function_call_output`).
DROP_OUTPUT = ["conversation.item.create:function_call_output"]
#: A user text that does not mention the weather: today's default script answers it without a tool call.
ORDER_ONLY_TEXT = "Where is my order A-1234?"
#: Severities `rtrace analyze --fail-on warning` fails on.
WARNING_OR_ABOVE = ("warning", "error")


@dataclasses.dataclass(frozen=True)
class Client:
    """How to start one client's driver, and the URL it is given (as the client takes it) for a running server."""

    name: str
    command: tuple[str, ...]
    url: Callable[[RealtimeServer], str]
    #: Serve it `wss://` (`rtrace serve --tls`, a certificate made for the run) and trust it by the variables
    #: `rtrace.net.link.tls.trust_env` names.
    tls: bool = False


def python_client(env: str, driver: str, url: Callable[[RealtimeServer], str], tls: bool = False) -> Client:
    """A Python driver (tests/e2e/DRIVER) run by `.venv-e2e-<env>`'s interpreter."""
    return Client(env, (str(client_python(env)), str(E2E / driver)), url, tls)


def node_client(name: str, driver: str, url: Callable[[RealtimeServer], str], tls: bool = False) -> Client:
    """A Node driver (tests/e2e/node/DRIVER), with the packages of tests/e2e/node/node_modules."""
    return Client(name, (str(client_node()), str(E2E / "node" / driver)), url, tls)


def http_url(server: RealtimeServer) -> str:
    """`http(s)://127.0.0.1:PORT/v1`, the OPENAI_BASE_URL serve prints: for clients that take an http base URL."""
    return server.http_url


def base_url(server: RealtimeServer) -> str:
    """`ws://127.0.0.1:PORT/v1`, what serve prints: for clients that append `/realtime?model=` themselves."""
    return server.url


def realtime_url(server: RealtimeServer) -> str:
    """The full websocket URL, for clients that use their URL as given."""
    return f"{server.url}/realtime?model=gpt-realtime"


def trace_records(path: Path) -> Iterator[dict[str, Any]]:
    """The records of a native trace (not its header line), in order."""
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            record = json.loads(line) if line.strip() else None
            if isinstance(record, dict) and "dir" in record:
                yield record


def rtrace_pythonpath(folder: Path, *extra: ModuleType) -> str:
    """A PYTHONPATH that makes rtrace importable in a client's venv without changing the client's own packages:
    a folder of links to this checkout's `rtrace`, to orjson and to mypy_extensions (the runtime dependencies the
    in-process recorders use; the client keeps its own websockets), and to the packages `extra`."""
    import mypy_extensions
    import orjson

    shim = folder / "rtrace-path"
    if not shim.exists():
        shim.mkdir(parents=True)
        (shim / "rtrace").symlink_to(ROOT / "rtrace")
        for module in (orjson, mypy_extensions, *extra):
            src = Path(module.__file__ or "")
            target = src.parent if src.name == "__init__.py" else src  # a package's folder, or a module's file
            (shim / target.name).symlink_to(target)
    return str(shim)


async def drive(
    name: str, argv: list[str], timeout: float, env: dict[str, str] | None = None
) -> tuple[dict[str, Any], str]:
    """Run a driver (`argv`, with `env` added to this environment) to its end: (its summary, the last JSON line on
    its stdout; its stderr). It ends by itself within `timeout` (a watchdog 10 s later); at `timeout` + 15 s it is
    killed and the test fails."""
    proc = await asyncio.create_subprocess_exec(
        *argv,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "PYTHONUNBUFFERED": "1", "OPENAI_API_KEY": "sk-rtrace-test", **(env or {})},
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(), timeout=timeout + 15)
    except asyncio.TimeoutError:
        proc.kill()
        out, err = await proc.communicate()
        pytest.fail(f"{name}: the driver did not exit by itself; stderr tail:\n{err.decode(errors='replace')[-3000:]}")
    stderr = err.decode(errors="replace")
    lines = [line for line in out.decode(errors="replace").splitlines() if line.startswith("{")]
    if not lines:
        pytest.fail(f"{name}: driver exited {proc.returncode} without a summary\nstderr tail:\n{stderr[-3000:]}")
    return json.loads(lines[-1]), stderr


@dataclasses.dataclass
class Conn:
    """One connection of the recorded trace."""

    n: int
    client: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    server: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    #: `fault.injected` notes: `kind:spec` (e.g. `close-after:14`).
    faults: list[str] = dataclasses.field(default_factory=list)
    close_code: int | None = None
    #: Every record of the connection in order, as (`dir`, event).
    records: list[tuple[str, dict[str, Any]]] = dataclasses.field(default_factory=list)

    def creates(self) -> list[str]:
        """The items the client created, in order: `message:<role>`, `function_call`, `function_call_output`."""
        kinds = []
        for event in self.client:
            if event.get("type") == "conversation.item.create":
                item = event.get("item") or {}
                kind = str(item.get("type"))
                kinds.append(f"{kind}:{item.get('role')}" if kind == "message" else kind)
        return kinds

    def sent(self, event_type: str) -> int:
        """How many events of this type the client sent."""
        return sum(1 for event in self.client if event.get("type") == event_type)

    def errors(self) -> list[str]:
        """The codes of the server's `error` events."""
        return [str((e.get("error") or {}).get("code")) for e in self.server if e.get("type") == "error"]


@dataclasses.dataclass
class Run:
    """One driver run: its summary line, serve's recording, its analysis."""

    client: str
    summary: dict[str, Any]
    trace: Path
    report: TraceReport
    stderr: str

    @property
    def slugs(self) -> set[str]:
        return {f.slug for f in self.report.findings}

    @property
    def warnings(self) -> list[str]:
        """The findings `rtrace analyze --fail-on warning` fails on."""
        return [f"{f.rule} {f.slug} lines {f.lines}" for f in self.report.findings if f.severity in WARNING_OR_ABOVE]

    def records(self) -> Iterator[dict[str, Any]]:
        return trace_records(self.trace)

    def conns(self) -> list[Conn]:
        """The trace's connections, in the order they opened."""
        by_n: dict[int, Conn] = {}
        for rec in self.records():
            conn = by_n.setdefault(rec["conn"], Conn(rec["conn"]))
            event = rec["event"]
            conn.records.append((rec["dir"], event))
            if rec["dir"] == "client":
                conn.client.append(event)
            elif rec["dir"] == "server":
                conn.server.append(event)
            elif event.get("type") == "fault.injected":
                conn.faults.append(f"{event.get('fault')}:{event.get('spec')}")
            elif event.get("type") == "connection.closed":
                conn.close_code = event.get("code")
        return [by_n[n] for n in sorted(by_n)]

    def explain(self) -> str:
        found = [f"{f.rule} {f.slug} ({f.severity}) lines {f.lines}" for f in self.report.findings]
        wire = [(c.n, c.creates(), c.close_code, c.faults, c.errors()) for c in self.conns()]
        return (
            f"client={self.client}\nsummary={json.dumps(self.summary)}\nfindings={found}\n"
            f"wire (conn, creates, close code, faults, server errors)={wire}\ntrace={self.trace}\n"
            f"driver stderr tail:\n{self.stderr[-3000:]}"
        )


def run(
    client: Client,
    out: Path,
    *,
    timeout: float = 15.0,
    driver_args: tuple[str, ...] = (),
    url: Callable[[RealtimeServer], str] | None = None,
    own_tool: bool = False,
    close_code: int | None = None,
    env: dict[str, str] | None = None,
    preamble: bool | None = None,
    **faults: Any,
) -> Run:
    """Run `client`'s driver once against a fresh server with `faults` (`rtrace.net.faults.flags.Faults` fields, each
    firing once), recording to `out/serve.jsonl`. By default serve chooses the tool from the session the client
    declared, by the user text; `own_tool` forces a call of `TOOL` on every user turn (`--tool`). `env` is added to the
    driver's environment; `preamble` is `--preamble` (None: auto, as the model)."""
    trace = out / "serve.jsonl"
    endpoint = EndpointOptions(preamble=preamble)
    if own_tool:
        endpoint.tool, endpoint.tool_arguments = TOOL, json.dumps(TOOL_ARGUMENTS)
    files = tls.ensure("127.0.0.1", out / "tls") if client.tls else None
    if files is not None:
        env = {**{name: value for name, value, _ in tls.trust_env(files)}, **(env or {})}
    schedule = Schedule.of(Faults(close_code=close_code, **faults))
    options = ServerOptions(
        latency=LATENCY, record=trace, endpoint=endpoint, schedule=schedule, tls=files
    )
    summary, stderr = asyncio.run(_drive(client, options, timeout, driver_args, url or client.url, env))
    (out / "summary.json").write_text(json.dumps(summary, indent=1), encoding="utf-8")
    (out / "driver.stderr").write_text(stderr, encoding="utf-8")
    return Run(client.name, summary, trace, analyze_path(trace), stderr)


async def _drive(
    client: Client,
    options: ServerOptions,
    timeout: float,
    driver_args: tuple[str, ...],
    url: Callable[[RealtimeServer], str],
    env: dict[str, str] | None = None,
) -> tuple[dict[str, Any], str]:
    async with run_server(options) as server:
        argv = [*client.command, "--url", url(server), "--tool-name", TOOL, "--timeout", str(timeout), *driver_args]
        return await drive(client.name, argv, timeout, env)


#: The close code of both faults: a server error (the openai SDK reconnects on it; 1000 it does not retry).
FAULT_CLOSE_CODE = 1011


def scenario_fixtures(make_client: Callable[[], Client]) -> tuple[Any, Any, Any, Any]:
    """A client module's four runs, each made once (module scope) and shared by the tests that read it: `healthy`
    (text), `healthy_audio` (`--modality audio`), `reconnect` (`close_after` right after the call: the socket
    closes while the tool runs) and `drop` (the output's create dropped before its ack), both faults closing with
    `FAULT_CLOSE_CODE`. Assign them at module level: `healthy, healthy_audio, reconnect, drop = scenario_fixtures(f)`.
    """

    @pytest.fixture(scope="module", name="healthy")
    def healthy(tmp_path_factory: pytest.TempPathFactory) -> Run:
        return run(make_client(), tmp_path_factory.mktemp("healthy"))

    @pytest.fixture(scope="module", name="healthy_audio")
    def healthy_audio(tmp_path_factory: pytest.TempPathFactory) -> Run:
        return run(make_client(), tmp_path_factory.mktemp("audio"), driver_args=("--modality", "audio"))

    @pytest.fixture(scope="module", name="reconnect")
    def reconnect(healthy: Run, tmp_path_factory: pytest.TempPathFactory) -> Run:
        out = tmp_path_factory.mktemp("reconnect")
        return run(make_client(), out, close_after=events_through_call(healthy), close_code=FAULT_CLOSE_CODE)

    @pytest.fixture(scope="module", name="drop")
    def drop(tmp_path_factory: pytest.TempPathFactory) -> Run:
        return run(make_client(), tmp_path_factory.mktemp("drop"), drop_on=DROP_OUTPUT, close_code=FAULT_CLOSE_CODE)

    return healthy, healthy_audio, reconnect, drop


def common_tests(make_client: Callable[[], Client]) -> tuple[Any, Any, Any]:
    """The tests every client module has, on the fixtures of `scenario_fixtures`: the audio turn, its audio,
    and serve choosing the session's tool by itself. Assign them at module
    level: `test_healthy_audio_turn, test_audio_is_streamed, test_serve_calls_the_session_tool = common_tests(f)`.
    """

    def test_healthy_audio_turn(healthy_audio: Run) -> None:
        assert_audio_turn(healthy_audio)

    def test_audio_is_streamed(healthy_audio: Run) -> None:
        assert_audio_streamed(healthy_audio)

    def test_serve_calls_the_session_tool(tmp_path: Path) -> None:
        text = ("--user-text", ORDER_ONLY_TEXT)
        assert_calls_the_session_tool(run(make_client(), tmp_path, driver_args=text))

    return test_healthy_audio_turn, test_audio_is_streamed, test_serve_calls_the_session_tool


def events_through_call(healthy: Run) -> int:
    """The server events of connection 1 up to the `response.done` that holds the first function call, in a
    healthy run: `close_after` with it closes the socket right after the call, while the tool runs."""
    count = 0
    for rec in healthy.records():
        if rec["dir"] != "server" or rec["conn"] != 1:
            continue
        count += 1
        event = rec["event"]
        if event.get("type") == "response.done":
            output = (event.get("response") or {}).get("output") or []
            if any(item.get("type") == "function_call" for item in output):
                return count
    raise AssertionError(f"no function call on connection 1 of the healthy run\n{healthy.explain()}")


def assert_healthy(run_: Run) -> None:
    """The turn completed on one connection: a call of `TOOL` with the fake model's arguments, its output
    acknowledged, an answer that quotes the tool's result; and `rtrace analyze` finds nothing at warning or above."""
    s = run_.summary
    assert s["status"] == "done" and s["ok"], run_.explain()
    assert [(c["name"], json.loads(c["arguments"])) for c in s["tool_calls"]] == [(TOOL, TOOL_ARGUMENTS)], (
        run_.explain()
    )
    assert TOOL_STATUS in (s["final_answer"] or ""), run_.explain()
    assert s["reconnected"] == 0, run_.explain()
    (conn,) = run_.conns()
    assert "function_call_output" in conn.creates() and conn.errors() == [], run_.explain()
    assert run_.report.connections == 1, run_.explain()
    assert run_.warnings == [], run_.explain()


def assert_a_preamble_came_before_the_call(trace: Path) -> None:
    """The trace's first call came after a message in the same response (serve's `--preamble on`, the real
    gpt-realtime-2.1's shape): output indexes 0 and 1 of one `response.done`."""
    done = [r["event"]["response"] for r in trace_records(trace) if r["event"].get("type") == "response.done"]
    shapes = [[o.get("type") for o in d.get("output") or []] for d in done]
    assert ["message", "function_call"] in shapes, shapes


def assert_slugs(run_: Run, expected: set[str]) -> None:
    """`rtrace analyze` reports exactly the rules `expected` (slugs, every severity), whatever the order in which
    the trace noted a reconnect and the close of the connection it replaced."""
    assert run_.slugs == expected, run_.explain()


def assert_calls_the_session_tool(run_: Run) -> None:
    """With serve choosing the tool itself (and a user text that does not name it), the turn still completes
    with a call of the session's tool, its arguments of the schema's types."""
    s = run_.summary
    assert s["status"] == "done" and s["ok"], run_.explain()
    assert [c["name"] for c in s["tool_calls"]] == [TOOL], run_.explain()
    assert isinstance(json.loads(s["tool_calls"][0]["arguments"]).get("order_id"), str), run_.explain()
    assert run_.warnings == [], run_.explain()


def assert_audio_turn(run_: Run) -> None:
    """A healthy turn (`assert_healthy`) whose answer was spoken: the client asked for audio output and the
    fake model answered with an audio part (its transcript is the answer)."""
    assert_healthy(run_)
    (conn,) = run_.conns()
    asked = [e for e in conn.client if "audio" in _output_modalities(e)]
    assert asked, run_.explain()
    assert any(e.get("type") == "response.output_audio_transcript.done" for e in conn.server), run_.explain()


def _output_modalities(event: dict[str, Any]) -> list[str]:
    """The output modalities a `session.update` or `response.create` asks for (GA `output_modalities`, beta and
    Voice Live `modalities`; none named: [])."""
    body = event.get("session") if event.get("type") == "session.update" else event.get("response")
    value = (body.get("output_modalities") or body.get("modalities")) if isinstance(body, dict) else None
    return [str(v) for v in value] if isinstance(value, list) else []


def assert_audio_streamed(run_: Run) -> None:
    """The client received output audio (PCM16 at 24 kHz, as the drivers ask)."""
    assert run_.summary["audio_bytes"] > 0, run_.explain()
    assert run_.summary["audio_bytes"] % 2 == 0, run_.explain()


def assert_closed_while_the_tool_ran(run_: Run, code: int) -> Conn:
    """Connection 1 ended by the `close_after` fault, with `code`, right after the call and before its output;
    returns it."""
    first = run_.conns()[0]
    assert [f for f in first.faults if f.startswith("close-after:")], run_.explain()
    assert first.close_code == code, run_.explain()
    assert "function_call_output" not in first.creates(), run_.explain()
    calls = [e for e in first.server if e.get("type") == "response.done" and _holds_call(e)]
    assert calls, run_.explain()
    return first


def assert_dropped_on_the_output(run_: Run, code: int) -> Conn:
    """Connection 1 ended by the `drop_on` fault at the output's create (never answered), with `code`."""
    first = run_.conns()[0]
    assert first.faults == [f"drop-on:{DROP_OUTPUT[0]}"], run_.explain()
    assert first.close_code == code, run_.explain()
    assert first.creates()[-1:] == ["function_call_output"], run_.explain()
    acks = [e for e in first.server if e.get("type") == "conversation.item.added"]
    assert (acks[-1].get("item") or {}).get("type") != "function_call_output", run_.explain()
    return first


def assert_fault_noted_when_it_acted(run_: Run) -> None:
    """The `fault.injected` note of connection 1 follows the last server event the fault let through."""
    records = run_.conns()[0].records
    note = max(i for i, (d, e) in enumerate(records) if d == "meta" and e.get("type") == "fault.injected")
    last_server = max(i for i, (d, _) in enumerate(records) if d == "server")
    assert note > last_server, run_.explain()


def _holds_call(event: dict[str, Any]) -> bool:
    return any(item.get("type") == "function_call" for item in (event.get("response") or {}).get("output") or [])


@dataclasses.dataclass
class ClientTrace:
    """One driver run recorded twice: by serve (`serve`, the reference) and on the client's side (`trace`: its
    in-process recorder, `recorded_run`, or `rtrace record` in front of serve, `proxied_run`), with its analysis."""

    serve: Run
    trace: Path
    report: TraceReport

    @property
    def slugs(self) -> set[str]:
        return {f.slug for f in self.report.findings}

    def explain(self) -> str:
        found = [f"{f.rule} {f.slug} ({f.severity}) lines {f.lines}" for f in self.report.findings]
        return f"client-side trace={self.trace}\nits findings={found}\n--- serve's run:\n{self.serve.explain()}"


def recorded_run(client: Client, out: Path, **kwargs: Any) -> ClientTrace:
    """`run` with the driver's `--record` (the client's in-process recorder, rtrace on its PYTHONPATH): serve's
    trace and the client's, and the analysis of both."""
    local = out / "local.jsonl"
    args = (*kwargs.pop("driver_args", ()), "--record", str(local))
    serve = run(client, out, driver_args=args, env={"PYTHONPATH": rtrace_pythonpath(out)}, **kwargs)
    assert local.exists(), serve.explain()
    return ClientTrace(serve, local, analyze_path(local))


def witness_types(
    report: TraceReport, records: list[dict[str, Any]], skip: frozenset[int] = frozenset()
) -> dict[str, list[tuple[str, str]]]:
    """Per rule slug, the (dir, type) of each witness line of its findings but those in `skip`, in `records` (a
    trace's lines, the header line included: line 1)."""
    out: dict[str, list[tuple[str, str]]] = {}
    for finding in report.findings:
        kinds = out.setdefault(finding.slug, [])
        for line in finding.lines:
            if line in skip:
                continue
            rec = records[line - 1] if 0 < line <= len(records) else {}
            kinds.append((str(rec.get("dir")), str((rec.get("event") or {}).get("type"))))
    return out


def trace_lines(path: Path) -> list[dict[str, Any]]:
    """Every line of a trace as JSON (the header included), by line number - 1."""
    with path.open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def client_frames(path: Path) -> dict[int, list[tuple[int, str]]]:
    """Per connection, the (line, type) of each client event of a trace."""
    out: dict[int, list[tuple[int, str]]] = {}
    for n, rec in enumerate(trace_lines(path), 1):
        if rec.get("dir") == "client":
            out.setdefault(int(rec["conn"]), []).append((n, str((rec.get("event") or {}).get("type"))))
    return out


def proxied_run(
    client: Client, out: Path, *, timeout: float = 15.0, close_code: int | None = None, **faults: Any
) -> ClientTrace:
    """`client`'s driver pointed at `rtrace record` (`net.link.proxy.run_proxy`, recording `out/record.jsonl`), whose
    upstream is a fresh `rtrace serve` with `faults` (recording `out/serve.jsonl`)."""
    from rtrace.net.link.proxy import RecordOptions, run_proxy

    trace, proxied = out / "serve.jsonl", out / "record.jsonl"
    schedule = Schedule.of(Faults(close_code=close_code, **faults))
    options = ServerOptions(latency=LATENCY, record=trace, schedule=schedule)

    async def main() -> tuple[dict[str, Any], str]:
        async with (
            run_server(options) as server,
            run_proxy(RecordOptions(upstream=f"{server.url}/realtime", output=proxied)) as proxy,
        ):
            argv = [*client.command, "--url", client.url(proxy), "--tool-name", TOOL, "--timeout", str(timeout)]  # type: ignore[arg-type]
            return await drive(client.name, argv, timeout)

    summary, stderr = asyncio.run(main())
    serve = Run(client.name, summary, trace, analyze_path(trace), stderr)
    return ClientTrace(serve, proxied, analyze_path(proxied))


def assert_same_findings(rec: ClientTrace) -> set[str]:
    """The client's trace (in process, or `rtrace record`'s in front of serve) gives the rules serve's recording
    gives, each with witnesses of the same (dir, type).

    The one difference allowed is what only the client can see: on each connection its trace holds the client
    events serve read, in order, and then maybe frames the client sent that serve never read (still in flight,
    serve's latency included, when the server closed). A rule only the client's trace reports must have such a
    frame among its witnesses; the witnesses of a rule both report are compared without them. Returns the rules
    only the client's trace reports."""
    path = rec.trace
    mine, theirs = client_frames(path), client_frames(rec.serve.trace)
    unread: set[int] = set()
    for conn, frames in mine.items():
        served = [kind for _, kind in theirs.get(conn, [])]
        assert [kind for _, kind in frames[: len(served)]] == served, (conn, frames, served, rec.explain())
        unread.update(line for line, _ in frames[len(served) :])
    assert rec.serve.slugs <= rec.slugs, rec.explain()
    extra = rec.slugs - rec.serve.slugs
    for finding in rec.report.findings:
        if finding.slug in extra:
            assert unread & set(finding.lines), (finding.slug, finding.lines, sorted(unread), rec.explain())
    kinds = witness_types(rec.report, trace_lines(path), frozenset(unread))
    served_kinds = witness_types(rec.serve.report, trace_lines(rec.serve.trace))
    for slug, witnesses in served_kinds.items():
        assert kinds[slug] == witnesses, (slug, kinds[slug], witnesses, rec.explain())
    return extra
