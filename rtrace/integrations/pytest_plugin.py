"""The pytest plugin (entry point `pytest11: rtrace`): the `rtrace_server` fixture, the `rtrace` marker and the
`--rtrace-*` options, so a test suite runs its realtime client against `rtrace serve` instead of a mock server of
its own, and fails when the session it recorded has a finding.

Importing it costs a test session nothing: only definitions run at start-up; the server, asyncio and websockets
are imported when a test asks for the fixture. The server runs on a thread with its own event loop, so a test may
be sync, pytest-asyncio or anyio, and its loop may run or not; the thread, the loop and the port are gone when the
test's call ends, and the session is analyzed then.

**Hunting** (`pytest --rtrace-hunt=5m tests/test_agent.py`, or `@pytest.mark.rtrace(hunt="5m")`): instead of
running once, each test that uses the fixture is the command of an `rtrace hunt` (`rtrace.net.hunt.hunt`): the test
runs again and again in a child pytest, each time against a server of the hunt with another fault schedule, and
fails when the hunt found a bug at or above `fail_on` (the bugs' report is its failure text; their scripts,
traces and minimized traces are kept in the test's trace folder). In a child of a hunt (`RTRACE_HUNT` in the
environment, as `rtrace hunt -- pytest ...` also sets it) the fixture starts no server of its own: it hands out the
hunt's, and the hunt judges the session. With `upstream="ws://127.0.0.1:PORT/v1"` too, every run of the hunt goes
through a link to that endpoint (`rtrace hunt --upstream`; an endpoint on this machine only: a billed one is
hunted with `rtrace hunt --upstream URL --runs N -- pytest ...`).
"""

from __future__ import annotations

import dataclasses
import os
import sys
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from ..core.severity import FAIL_ON_LEVELS, failing

if TYPE_CHECKING:
    import asyncio
    import threading

    from ..engine.fold import TraceReport
    from ..net.link.server import RealtimeServer, ServerOptions
    from ..rules.base import Finding

#: The levels of `fail_on` (`never`: no finding fails the test): `rtrace.core.severity.FAIL_ON_LEVELS`.
LEVELS = FAIL_ON_LEVELS
#: What the marker (and an indirect parametrization of the fixture) may say besides the `rtrace serve` options
#: (`rtrace.net.fake.options.ENDPOINT_OPTIONS`), which it takes by their fields.
PLUGIN_OPTIONS = ("fail_on", "hunt", "hunt_runs", "upstream")
#: Runs of each bug's minimal schedule a test's hunt takes its rate over (`hunt_runs` in the marker).
HUNT_RUNS = 5
#: `options_from_cli` options a test may not set: the plugin binds a free loopback port and records the trace.
_FIXED = ("host", "port", "record")
#: Seconds the server may take to start, or to stop once the test is done.
_WAIT = 30.0

_SERVER_KEY = pytest.StashKey["RtraceServer"]()
_LATENCIES_KEY = pytest.StashKey[list[float]]()
_HUNT_KEY = pytest.StashKey["tuple[ServerOptions, float, str, Path, int, str | None]"]()
#: Set in the environment of the commands a hunt runs (`rtrace.net.hunt.hunt.CommandTarget`).
HUNT_ENV = "RTRACE_HUNT"
#: Seconds a hunt stopped by Ctrl-C has to end its runs and return what it found (`_hunted`); then it is ended
#: at once, as by a second Ctrl-C.
STOP_GRACE = 10.0


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("rtrace", "rtrace: a fake realtime endpoint for each test (the rtrace_server fixture)")
    group.addoption(
        "--rtrace-latency",
        metavar="LIST",
        help="run every test that uses rtrace_server at each of these latencies, e.g. 0,10,50ms",
    )
    group.addoption(
        "--rtrace-fail-on",
        choices=LEVELS,
        help="a test fails when its session has a finding at or above this severity (default: error)",
    )
    group.addoption("--rtrace-traces", metavar="DIR", help="keep each test's trace in DIR (default: its tmp_path)")
    group.addoption(
        "--rtrace-hunt",
        metavar="BUDGET",
        help="hunt for bugs in every test that uses rtrace_server, for this long each (e.g. 5m): rtrace hunt",
    )
    parser.addini("rtrace_fail_on", "rtrace: the severity of a finding that fails a test (default: error)")
    parser.addini("rtrace_traces", "rtrace: keep each test's trace in this directory (default: its tmp_path)")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "rtrace(**options): options of the rtrace_server fixture: latency='50ms', script='scenario.toml', "
        "tool='NAME', drop_on=[...], tls=True (wss://), ... (the options of `rtrace serve`), "
        "fail_on='error'|'warning'|'info'|'never', hunt='5m' (hunt for bugs in this test instead of running it once)",
    )
    text = config.getoption("rtrace_latency", None)
    if text:
        from ..net.hunt.sweep import parse_latency_list

        try:
            config.stash[_LATENCIES_KEY] = parse_latency_list(text, "--rtrace-latency")
        except ValueError as e:
            raise pytest.UsageError(str(e)) from None


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """`--rtrace-latency 0,10,50ms`: every test that uses the fixture runs once per latency (ids `0ms`, `10ms`...)."""
    latencies = metafunc.config.stash.get(_LATENCIES_KEY, None)
    if not latencies or "rtrace_server" not in metafunc.fixturenames:
        return
    from ..net.hunt.sweep import label

    metafunc.parametrize("rtrace_latency", latencies, ids=[label(v) for v in latencies])


@pytest.fixture
def rtrace_latency() -> float | None:
    """The latency (seconds) `--rtrace-latency` runs this test at; None without that option."""
    return None


@pytest.fixture
def rtrace_server(request: pytest.FixtureRequest, rtrace_latency: float | None) -> Iterator[RtraceServer]:
    """A fake realtime endpoint (`rtrace serve`) on a free 127.0.0.1 port for this test, recording its session.

    Options come from `@pytest.mark.rtrace(...)` (the closest marker wins), then from an indirect parametrization
    (`request.param`, a dict), then `--rtrace-latency`. When the test function returns the server stops, the trace
    is analyzed, and the test fails if a finding is at or above `fail_on`."""
    if os.environ.get(HUNT_ENV):
        yield HuntedServer()  # type: ignore[misc]  # a run of a hunt: the hunt's server, judged by the hunt
        return
    options = _options(request)
    if rtrace_latency is not None:
        options["latency"] = [f"{rtrace_latency!r}s"]
    fail_on = str(options.pop("fail_on", None) or _configured_fail_on(request.config))
    if fail_on not in LEVELS:
        pytest.fail(f"rtrace: fail_on={fail_on!r}: give one of {', '.join(LEVELS)}", pytrace=False)
    budget = options.pop("hunt", None) or request.config.getoption("rtrace_hunt", None)
    runs = options.pop("hunt_runs", HUNT_RUNS)
    if not isinstance(runs, int) or isinstance(runs, bool) or runs < 1:
        pytest.fail(f"rtrace: hunt_runs={runs!r}: give a whole number of at least 1", pytrace=False)
    upstream = options.pop("upstream", None)
    server_options = _server_options(request, options)
    if upstream is not None:
        _check_upstream(upstream, server_options, bool(budget))
    trace = _trace_path(request)
    if budget:
        hunting = (server_options, _hunt_budget(budget), fail_on, trace.with_suffix(""), runs, upstream)
        request.node.stash[_HUNT_KEY] = hunting
    server = RtraceServer(server_options, trace, fail_on)
    server.start()
    if not budget:  # a hunted test's own server is only there for its other fixtures: the hunt judges
        request.node.stash[_SERVER_KEY] = server
    try:
        yield server
    finally:
        server.close()


def _check_upstream(upstream: Any, options: ServerOptions, hunting: bool) -> None:
    """`upstream=URL` (with `hunt=`, as `rtrace hunt --upstream`): every run of the test's hunt through a link to
    a `ws://`/`wss://` endpoint on this machine (a billed one is `rtrace hunt --upstream URL --runs N -- pytest`,
    where the runs are counted); the marker's faults all ones a link makes. A mistake fails the test's setup."""
    from ..net.link.common import is_loopback
    from ..net.link.proxy import check_upstream
    from ..net.link.upstream import check_link

    if not hunting:
        pytest.fail("rtrace: upstream= hunts through a link: give hunt= too (one run: rtrace serve --upstream URL)",
                    pytrace=False)  # fmt: skip
    try:
        check_upstream(str(upstream))
        check_link(options)
    except ValueError as e:
        pytest.fail(f"rtrace: {e}", pytrace=False)
    if not is_loopback(str(upstream)):
        pytest.fail(f"rtrace: upstream={upstream!r}: every run would be a real, billed session; hunt it with "
                    "rtrace hunt --upstream URL --runs N -- pytest ... (its runs counted)", pytrace=False)  # fmt: skip


def _hunt_budget(value: Any) -> float:
    from ..core.durations import parse_duration

    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    try:
        seconds = parse_duration(str(value), "--rtrace-hunt")
    except ValueError as e:
        pytest.fail(f"rtrace: {e}", pytrace=False)
    if seconds <= 0:
        pytest.fail(f"rtrace: hunt={value!r}: give a time above 0, e.g. 5m", pytrace=False)
    return seconds


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    """A test the plugin hunts in: the hunt instead of one call (see the module docstring)."""
    hunting = pyfuncitem.stash.get(_HUNT_KEY, None)
    if hunting is None:
        return None
    template, budget, fail_on, folder, runs, upstream = hunting
    from ..net.hunt.hunt import HuntOptions
    from ..net.hunt.processes import Stopper

    root = pyfuncitem.config.rootpath
    path, _, rest = pyfuncitem.nodeid.partition("::")
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "--tb=short", "-rfE",
               "--rootdir", str(root), f"{root / path}::{rest}" if rest else str(root / path)]  # fmt: skip
    script = Path(template.schedule.path) if template.schedule.path else None  # the marker's: the runs' base
    stopper = Stopper()
    # the budget is the hunt's wall time, a run's too (a hang after a fault ends early: `HuntOptions.quiet`)
    options = HuntOptions(budget=budget, timeout=budget, out_dir=folder, template=template,
                          shrink_runs=min(2, runs), repro_runs=runs, max_bugs=5, script=script, stopper=stopper,
                          stdout_in_tail=True, upstream=upstream)  # fmt: skip
    result = _hunted(pyfuncitem, command, options, stopper)
    if result.clean_failed:
        tail = "\n".join(result.clean.stderr_tail if result.clean else [])
        pytest.fail(f"rtrace hunt: the test failed its clean run (no fault): nothing to hunt\n{tail}", pytrace=False)
    if result.clean is None:
        pytest.fail(f"rtrace hunt: the budget ran out during the clean run (no fault)\n{_hunt_text(result)}",
                    pytrace=False)  # fmt: skip
    failed = failing(result.bugs, fail_on)  # the one reading of "at or above" (`never`: none)
    text = _hunt_text(result)
    if result.not_done:  # never silent: a test that passes a hunt the budget cut says what was left undone
        pyfuncitem.warn(pytest.PytestWarning(f"rtrace hunt: not done within {budget:g}s: {'; '.join(result.not_done)}"))
    if failed:
        pytest.fail(text, pytrace=False)
    pyfuncitem.add_report_section("call", "rtrace hunt", text)
    return True


def _hunted(item: pytest.Function, command: list[str], options: Any, stopper: Any) -> Any:
    """The hunt of `command`, in a thread (the test's own loop, if any, stays untouched), its progress on the
    terminal as it goes. Ctrl-C stops it within seconds with what was found so far shown, then stops pytest; a
    second Ctrl-C, or a hunt not ended `STOP_GRACE` seconds after the first, stops it at once: every process its
    runs started killed, and pytest never waits on its thread (a daemon: neither here nor at the interpreter's
    exit)."""
    import concurrent.futures
    import threading

    from ..net.hunt.hunt import hunt
    from ..net.hunt.processes import kill_all_live
    from ..report.hunt import progress_line

    reporter = item.config.pluginmanager.get_plugin("terminalreporter")
    capture = item.config.pluginmanager.get_plugin("capturemanager")

    def say(text: str) -> None:  # on the terminal, past pytest's capture of the test's output
        if reporter is None:
            return
        if capture is None:
            reporter.write_line(text)
            return
        with capture.global_and_fixture_disabled():
            reporter.write_line(text)

    def progress(p: Any) -> None:
        say(progress_line(p))

    future: concurrent.futures.Future[Any] = concurrent.futures.Future()

    def work() -> None:
        try:
            future.set_result(hunt(command, options, progress, False))
        except BaseException as e:  # handed to the test's thread, which raises it
            future.set_exception(e)

    threading.Thread(target=work, name="rtrace-hunt", daemon=True).start()
    try:
        return future.result()
    except KeyboardInterrupt:
        stopper.stop("SIGINT")
        try:
            result = future.result(timeout=STOP_GRACE)
        except BaseException:  # a second Ctrl-C, the grace over, or the hunt failed: end what it runs now
            kill_all_live()
            raise KeyboardInterrupt from None
        say(_hunt_text(result))
        raise


def _hunt_text(result: Any) -> str:
    import io

    from ..report.console import plain_console
    from ..report.hunt import render_terminal

    out = io.StringIO()
    render_terminal(result, plain_console(out, width=120))
    return out.getvalue()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, object, object]:
    """After the test function: stop its server, analyze the session, fail a passing test on a finding at or above
    `fail_on`. A test that fails for any reason of its own (an assertion, a client that raised) gets rtrace's
    section: every finding so far, the faults that fired and where the trace is kept; the test's error stays the
    test's (nothing rtrace does while writing the section can replace it)."""
    server = item.stash.get(_SERVER_KEY, None)
    if server is None:
        return (yield)
    try:
        result = yield
    except BaseException:
        item.add_report_section("call", "rtrace", server.section_text())
        raise
    server.close()
    if server.failing:
        pytest.fail(server.failure_text(), pytrace=False)
    return result


class HuntedServer:
    """The fixture in a run of a hunt: where the hunt's server is (from the environment the hunt gave the test);
    the hunt records and judges the session, so this test reports no finding itself."""

    trace: Path | None = None
    closed = False
    fail_on = "never"
    @property
    def findings(self) -> list[Finding]:
        return []

    @property
    def failing(self) -> list[Finding]:
        return []

    @property
    def base_url(self) -> str:
        return os.environ["OPENAI_BASE_URL"]

    @property
    def url(self) -> str:
        return os.environ["RTRACE_URL"]

    @property
    def realtime_url(self) -> str:
        return os.environ["RTRACE_REALTIME_URL"]

    @property
    def port(self) -> int:
        from urllib.parse import urlsplit

        return urlsplit(self.url).port or 0

    @property
    def env(self) -> dict[str, str]:
        return {"OPENAI_BASE_URL": self.base_url, "RTRACE_URL": self.url, "RTRACE_REALTIME_URL": self.realtime_url}

    def close(self) -> None:
        self.closed = True


class RtraceServer:
    """The fake endpoint of one test. `base_url` is what `OPENAI_BASE_URL` wants (`http://127.0.0.1:PORT/v1`),
    `url` the websocket base (`ws://127.0.0.1:PORT/v1`, for clients that add `/realtime?model=...`),
    `realtime_url` the full websocket URL, `env` all three as `rtrace sweep` sets them, `trace` the recording.

    `report()` and `findings` analyze what was recorded: the whole session once the test function returned (or
    after `close()`), else the trace so far (connections still open are judged as if it ended there)."""

    def __init__(self, options: ServerOptions, trace: Path, fail_on: str = "error") -> None:
        import asyncio
        import threading

        from ..net.link.server import RealtimeServer

        self.trace = trace
        self.fail_on = fail_on
        self._server: RealtimeServer = RealtimeServer(dataclasses.replace(options, record=trace))
        self._loop: asyncio.AbstractEventLoop = asyncio.new_event_loop()
        self._thread: threading.Thread = threading.Thread(target=self._run, name="rtrace-server", daemon=True)
        self._report: TraceReport | None = None
        self.closed = False

    # -- where to connect ----------------------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        return self._server.http_url

    @property
    def url(self) -> str:
        return self._server.url

    @property
    def realtime_url(self) -> str:
        return self._server.realtime_url

    @property
    def port(self) -> int:
        return self._server.port

    @property
    def ca_file(self) -> Path | None:
        """With `tls=True` (or `cert`/`key`): the certificate a client trusts to reach `wss://`; else None."""
        files = self._server.options.tls
        return files.ca if files is not None else None

    @property
    def env(self) -> dict[str, str]:
        """`OPENAI_BASE_URL`, `RTRACE_URL` and `RTRACE_REALTIME_URL`, for a client in a subprocess; with TLS also
        the variable each runtime trusts the server's certificate by (`NODE_EXTRA_CA_CERTS`, `SSL_CERT_FILE`,
        `REQUESTS_CA_BUNDLE`)."""
        from ..net.link.tls import trust_env

        env = {"OPENAI_BASE_URL": self.base_url, "RTRACE_URL": self.url, "RTRACE_REALTIME_URL": self.realtime_url}
        files = self._server.options.tls
        if files is not None:
            env.update((name, value) for name, value, _ in trust_env(files))
        return env

    # -- life ------------------------------------------------------------------------------------------------------

    def _run(self) -> None:
        import asyncio

        loop = self._loop
        asyncio.set_event_loop(loop)
        try:
            loop.run_forever()
        finally:
            tasks = asyncio.all_tasks(loop)
            for task in tasks:
                task.cancel()
            loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.run_until_complete(loop.shutdown_default_executor())
            asyncio.set_event_loop(None)
            loop.close()

    def _call(self, coro: Any) -> Any:
        import asyncio

        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(_WAIT)

    def start(self) -> None:
        self._thread.start()
        try:
            self._call(self._server.start())
        except BaseException:
            self._halt()
            raise

    def _halt(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(_WAIT)

    def close(self) -> None:
        """Stop the server (each open connection is closed with 1001), end its thread and loop; the trace is then
        complete. Idempotent."""
        if self.closed:
            return
        self.closed = True
        try:
            self._call(self._server.stop())
        finally:
            self._halt()

    # -- what was recorded -----------------------------------------------------------------------------------------

    @property
    def connected(self) -> bool:
        """Whether a client reached the server: the trace exists once its first connection opened."""
        return self.trace.exists()

    def report(self) -> TraceReport:
        """The analysis of the session (an empty report when no client connected: nothing to judge)."""
        from ..engine.fold import TraceReport, analyze_path

        if self._report is not None:
            return self._report
        if not self.connected:
            report = TraceReport(str(self.trace), 0, 0, 0.0, [], [], 0)
        else:
            report = analyze_path(self.trace)
        if self.closed:
            self._report = report
        return report

    @property
    def findings(self) -> list[Finding]:
        return self.report().findings

    @property
    def failing(self) -> list[Finding]:
        """The findings at or above `fail_on`."""
        return failing(self.findings, self.fail_on)

    def faults(self) -> list[str]:
        """The faults that fired, one line each (`line 12, conn 1: drop_on conversation.item.create:...`), from
        the trace's `fault.injected` notes."""
        from ..core.loader import TraceReader

        if not self.connected:
            return []
        fired = []
        with TraceReader.open(self.trace) as reader:
            for record in reader:
                if record.dir == "meta" and record.type == "fault.injected":
                    event = record.event
                    cause = event.get("client_event_type")
                    on = f" (on the client's {cause})" if cause else ""
                    fired.append(
                        f"line {record.line}, conn {record.conn}: {event.get('fault')} {event.get('spec')}{on}"
                    )
        return fired

    def failure_text(self) -> str:
        """Why the session fails the test: the failing findings as the terminal report shows them, then the rest
        of the section (the other findings, the faults, where the trace is kept)."""
        failing = self.failing
        many = "s" if len(failing) != 1 else ""
        head = (
            f"rtrace: {len(failing)} finding{many} at or above {self.fail_on} in this test's session; "
            f"trace kept at {self.trace}"
        )
        return self._render(head, failing, [f for f in self.findings if f not in failing])

    def section_text(self) -> str:
        """rtrace's section of a test that failed for its own reason: every finding so far (whatever its
        severity), the faults that fired and the kept trace; or that no client connected. Never raises: a
        trace that cannot be read is said so."""
        try:
            self.close()
        except Exception as e:  # the server could not stop cleanly: say so, keep what was recorded
            stopped = f" (the server did not stop cleanly: {type(e).__name__}: {e})"
        else:
            stopped = ""
        if not self.connected:
            return (
                f"rtrace: no client connected to the fake endpoint ({self.realtime_url}) in this test, so there is "
                f"no trace and nothing to judge{stopped}\n"
            )
        try:
            findings = self.findings
            faults = self.faults()
        except Exception as e:
            return f"rtrace: the trace {self.trace} could not be analyzed: {type(e).__name__}: {e}{stopped}\n"
        many = "s" if len(findings) != 1 else ""
        head = (
            f"rtrace: {len(findings)} finding{many} in this test's session so far{stopped}; trace kept at {self.trace}"
        )
        return self._render(head, findings, [], faults)

    def _render(self, head: str, shown: list[Finding], others: list[Finding], faults: list[str] | None = None) -> str:
        """`head`, the `shown` findings in full, one line per finding of `others`, the faults that fired."""
        import io

        from rich.console import Console, Group

        from ..report.terminal import render_finding

        out = io.StringIO()
        console = Console(file=out, width=120, color_system=None, highlight=False, emoji=False, soft_wrap=False)
        console.print(head, markup=False, soft_wrap=True)
        for finding in shown:
            console.print(Group(*render_finding(finding)))
        if others:
            console.print("below that severity:", markup=False)
            for finding in others:
                console.print(
                    f"  {finding.severity:<7} {finding.rule} {finding.slug}  conn {finding.conn}  line "
                    f"{finding.at_line}: {finding.message}",
                    markup=False,
                    soft_wrap=True,
                )
        fired = self.faults() if faults is None else faults
        console.print(f"faults that fired: {len(fired) or 'none'}", markup=False)
        for fault in fired:
            console.print(f"  {fault}", markup=False, soft_wrap=True)
        return "\n".join(line.rstrip() for line in out.getvalue().rstrip().splitlines()) + "\n"


def _options(request: pytest.FixtureRequest) -> dict[str, Any]:
    """The markers' options (the closest wins), then `request.param`'s."""
    merged: dict[str, Any] = {}
    for marker in reversed(list(request.node.iter_markers("rtrace"))):
        if marker.args:
            pytest.fail("@pytest.mark.rtrace takes keyword options only, e.g. latency='50ms'", pytrace=False)
        merged.update(marker.kwargs)
    param = getattr(request, "param", None)
    if param is not None:
        if not isinstance(param, dict):
            pytest.fail("rtrace_server: an indirect parameter must be a dict of options", pytrace=False)
        merged.update(param)
    return merged


def _configured_fail_on(config: pytest.Config) -> str:
    return str(config.getoption("rtrace_fail_on") or config.getini("rtrace_fail_on") or "error")


def _trace_path(request: pytest.FixtureRequest) -> Path:
    """`--rtrace-traces DIR` (or the ini's), a file per test named after its id; else the test's tmp_path."""
    folder = request.config.getoption("rtrace_traces") or request.config.getini("rtrace_traces")
    if not folder:
        tmp: Path = request.getfixturevalue("tmp_path")
        return tmp / "rtrace.jsonl"
    root = Path(folder)
    if not root.is_absolute():
        root = Path(request.config.rootpath) / root
    root.mkdir(parents=True, exist_ok=True)
    name = "".join(c if c.isalnum() or c in "-_.[]" else "_" for c in request.node.nodeid)
    return root / f"{name[-180:]}.jsonl"


def _server_options(request: pytest.FixtureRequest, options: dict[str, Any]) -> ServerOptions:
    """`ServerOptions` from the test's options, as `rtrace serve` takes them; a mistake fails the test's setup."""
    from ..net.fake.options import renamed
    from ..net.link.server import options_from_cli

    said = renamed(options)
    if said is not None:
        pytest.fail(f"rtrace: {said}", pytrace=False)
    known = marker_options()
    unknown = sorted(set(options) - set(known))
    if unknown:
        pytest.fail(
            f"rtrace: unknown option{'s' if len(unknown) > 1 else ''} {', '.join(unknown)} "
            f"(known: {', '.join(sorted([*known, *PLUGIN_OPTIONS]))})",
            pytrace=False,
        )
    kwargs = {k: _cli_value(k, v, request) for k, v in options.items()}
    try:
        server = options_from_cli(**kwargs)
    except ValueError as e:
        pytest.fail(f"rtrace: {e}", pytrace=False)
    return dataclasses.replace(server, close_timeout=2.0)


def marker_options() -> list[str]:
    """The `rtrace serve` options a test may give the fixture, by field (`rtrace.net.fake.options.ENDPOINT_OPTIONS`)."""
    from ..net.fake.options import ENDPOINT_OPTIONS

    return [o.field for o in ENDPOINT_OPTIONS if o.field not in _FIXED]


def _seconds(value: Any) -> Any:
    """A Python number (seconds) as a duration in the grammar; anything else as it is."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return f"{value!r}s"
    return value


def _cli_value(name: str, value: Any, request: pytest.FixtureRequest) -> Any:
    """A marker's value as the command line would give it, by the option's kind: a path relative to the test
    file, a list (a single value given for one is a list of it), a Python number of seconds as a duration."""
    from ..net.fake.options import DURATION_KINDS, LIST_KINDS, OPTION_BY_FIELD

    kind = OPTION_BY_FIELD[name].kind
    if kind == "path":
        path = Path(os.fspath(value))
        return str(path if path.is_absolute() else request.path.parent / path)
    if kind in LIST_KINDS:
        values = list(value) if isinstance(value, (list, tuple, set)) else [value]
        if kind in DURATION_KINDS:
            values = [_seconds(v) for v in values]
        return [v if kind == "numbers" else str(v) for v in values]
    if kind in DURATION_KINDS:
        return _seconds(value)
    return value


__all__ = ["LEVELS", "HuntedServer", "RtraceServer", "rtrace_latency", "rtrace_server"]
