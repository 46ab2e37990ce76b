"""The pytest plugin (`rtrace.integrations.pytest_plugin`), run as a user runs it: test files of their own under
`pytester`, with a small websocket client (websockets' own) standing in for their realtime client."""

from __future__ import annotations

import json
import socket
import sys
import threading
from pathlib import Path

import pytest

from rtrace.engine.fold import analyze_path

pytest_plugins = ("pytester",)

#: The users' helpers: a clean turn, and a client that deletes the output of its own tool call (RT101).
CLIENTS = '''
import json

from websockets.asyncio.client import connect as aconnect
from websockets.sync.client import connect

CALL = {"type": "function_call", "id": "item_call", "call_id": "c1", "name": "get_weather", "arguments": "{}"}
OUTPUT = {"type": "function_call_output", "id": "item_out", "call_id": "c1", "output": "sunny"}


def user(text):
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def _until(ws, kind):
    while True:
        event = json.loads(ws.recv(timeout=5))
        if event["type"] == kind:
            return event


def chat(url, text="hello"):
    """One user turn and its answer; returns the answer's text."""
    with connect(url) as ws:
        _until(ws, "session.created")
        ws.send(json.dumps({"type": "conversation.item.create", "item": user(text)}))
        _until(ws, "conversation.item.added")
        ws.send(json.dumps({"type": "response.create"}))
        done = _until(ws, "response.done")
    part = done["response"]["output"][0]["content"][0]
    return part.get("text") or part.get("transcript")


def delete_tool_output(url):
    with connect(url) as ws:
        _until(ws, "session.created")
        for item in (CALL, OUTPUT):
            ws.send(json.dumps({"type": "conversation.item.create", "item": item}))
            _until(ws, "conversation.item.added")
        ws.send(json.dumps({"type": "conversation.item.delete", "item_id": "item_out"}))
        _until(ws, "conversation.item.deleted")


async def _auntil(ws, kind):
    while True:
        event = json.loads(await ws.recv())
        if event["type"] == kind:
            return event


async def achat(url, delete_output=False):
    async with aconnect(url) as ws:
        await _auntil(ws, "session.created")
        for item in (CALL, OUTPUT):
            await ws.send(json.dumps({"type": "conversation.item.create", "item": item}))
            await _auntil(ws, "conversation.item.added")
        if delete_output:
            await ws.send(json.dumps({"type": "conversation.item.delete", "item_id": "item_out"}))
            await _auntil(ws, "conversation.item.deleted")
        await ws.send(json.dumps({"type": "response.create"}))
        await _auntil(ws, "response.done")
'''


INI = "[pytest]\nasyncio_default_fixture_loop_scope = function\n"


@pytest.fixture
def users(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(clients=CLIENTS)
    pytester.makeini(INI)
    pytester.syspathinsert()
    return pytester


def test_a_clean_session_passes_and_a_racy_one_fails_with_the_finding_and_the_kept_trace(
    users: pytest.Pytester,
) -> None:
    users.makepyfile(
        test_agent="""
        import pytest
        from clients import chat, delete_tool_output

        def test_clean(rtrace_server):
            assert chat(rtrace_server.realtime_url) == "You said: hello"

        @pytest.mark.rtrace(latency="20ms")
        def test_racy(rtrace_server):
            delete_tool_output(rtrace_server.url + "/realtime")
        """
    )
    result = users.runpytest()
    result.assert_outcomes(passed=1, failed=1)
    out = result.stdout.str()
    # the failure is the terminal report's finding: severity, rule, slug, conn, lines, message, witness, fix
    result.stdout.fnmatch_lines(
        [
            "rtrace: 1 finding at or above error in this test's session; trace kept at *rtrace.jsonl",
            "*error   RT101 deleted-function-call-output  conn 1  lines *",
            "*function_call_output item_out (c1) deleted at line * while function_call item_call (c1) stays*",
            "*fix: *",
        ]
    )
    result.stdout.fnmatch_lines(["*_ test_racy _*", "rtrace: 1 finding at or above error*"], consecutive=True)
    trace = Path(out.split("trace kept at ")[1].split()[0])
    assert [f.rule for f in analyze_path(trace).findings if f.severity == "error"] == ["RT101"]
    header = json.loads(trace.read_text().splitlines()[0])
    assert header["latency"] == 0.02


def test_async_tests_of_pytest_asyncio_and_anyio_run_against_the_server(users: pytest.Pytester) -> None:
    users.makepyfile(
        test_async="""
        import asyncio
        import pytest
        from clients import achat

        @pytest.mark.asyncio
        async def test_asyncio_clean(rtrace_server):
            await achat(rtrace_server.realtime_url)

        @pytest.mark.asyncio
        async def test_asyncio_racy(rtrace_server):
            await achat(rtrace_server.realtime_url, delete_output=True)

        @pytest.mark.anyio
        async def test_anyio_clean(rtrace_server):
            await achat(rtrace_server.realtime_url)

        @pytest.mark.anyio
        async def test_anyio_racy(rtrace_server):
            await achat(rtrace_server.realtime_url, delete_output=True)

        @pytest.fixture
        def anyio_backend():
            return "asyncio"
        """
    )
    result = users.runpytest("-v")
    result.assert_outcomes(passed=2, failed=2)
    result.stdout.fnmatch_lines(["*test_asyncio_clean PASSED*", "*test_asyncio_racy FAILED*"], consecutive=False)
    result.stdout.fnmatch_lines(["*test_anyio_clean PASSED*", "*test_anyio_racy FAILED*"], consecutive=False)
    # each failure shows its finding once (the short summary repeats it in full when CI is set: not counted)
    failures = result.stdout.str().split("short test summary info")[0]
    assert failures.count("RT101 deleted-function-call-output") == 2


def test_rtrace_latency_runs_every_rtrace_test_at_each_latency(users: pytest.Pytester) -> None:
    users.makepyfile(
        test_sweep="""
        import json
        import time
        from clients import chat

        def test_turn(rtrace_server, rtrace_latency):
            t0 = time.monotonic()
            chat(rtrace_server.realtime_url)
            # session.created, the item's ack and the response each wait out the latency
            assert time.monotonic() - t0 >= 3 * rtrace_latency
            rtrace_server.close()
            header = json.loads(rtrace_server.trace.read_text().splitlines()[0])
            assert header["latency"] == rtrace_latency

        def test_without_the_fixture():
            pass
        """
    )
    result = users.runpytest("--rtrace-latency", "0,10,50ms", "-v")
    result.assert_outcomes(passed=4)
    result.stdout.fnmatch_lines(
        ["*test_turn?0ms? PASSED*", "*test_turn?10ms? PASSED*", "*test_turn?50ms? PASSED*"], consecutive=False
    )
    assert "test_without_the_fixture PASSED" in result.stdout.str()
    bad = users.runpytest("--rtrace-latency", "fast")
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    assert "--rtrace-latency fast: not a duration" in bad.stderr.str()
    bare = users.runpytest("--rtrace-latency", "0,10,50")  # the grammar of `rtrace sweep --latency`: no unit, no guess
    assert bare.ret == pytest.ExitCode.USAGE_ERROR
    assert "--rtrace-latency 0,10,50: a list of durations needs a unit" in bare.stderr.str()


def test_marker_script_and_fail_on_reach_the_fixture_and_findings_are_data(users: pytest.Pytester) -> None:
    users.makefile(
        ".toml",
        scenario="""
        [[turn]]
        when = { user = "order" }
        text = "Order 42 ships tomorrow."
        """,
    )
    users.makepyfile(
        test_options="""
        import pytest
        from clients import chat, delete_tool_output

        pytestmark = pytest.mark.rtrace(script="scenario.toml")

        def test_script_answers(rtrace_server):
            assert chat(rtrace_server.realtime_url, "where is my order?") == "Order 42 ships tomorrow."

        @pytest.mark.rtrace(fail_on="never")
        def test_expected_race(rtrace_server):
            delete_tool_output(rtrace_server.realtime_url)
            assert [f.rule for f in rtrace_server.findings if f.severity == "error"] == ["RT101"]
            rtrace_server.close()
            (finding,) = [f for f in rtrace_server.findings if f.rule == "RT101"]
            assert any("deleted" in w.summary for w in finding.witness)

        @pytest.mark.parametrize("rtrace_server", [{"tool": "lookup_order", "fail_on": "warning"}], indirect=True)
        def test_indirect_options(rtrace_server):
            chat(rtrace_server.realtime_url, "anything")
        """
    )
    result = users.runpytest("-v")
    # the forced tool call is never answered by this client: RT103 (a warning) fails it at fail_on=warning
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(["*test_indirect_options?rtrace_server0? FAILED*"], consecutive=False)
    result.stdout.fnmatch_lines(["*warning RT103 unanswered-function-call*"])
    # the ini and the command line set the level of every test without its own
    users.makeini(INI + "rtrace_fail_on = never\n")
    users.makepyfile(test_racy="from clients import delete_tool_output\n\n"
                     "def test_racy(rtrace_server):\n    delete_tool_output(rtrace_server.url)\n")  # fmt: skip
    users.runpytest("test_racy.py").assert_outcomes(passed=1)
    users.runpytest("test_racy.py", "--rtrace-fail-on", "error").assert_outcomes(failed=1)


def test_a_failing_test_gets_the_findings_as_a_section_and_mistakes_fail_the_setup(users: pytest.Pytester) -> None:
    users.makepyfile(
        test_mistakes="""
        import pytest
        from clients import delete_tool_output

        def test_fails_itself(rtrace_server):
            delete_tool_output(rtrace_server.url)
            assert False, "the test's own failure"

        @pytest.mark.rtrace(latncy="50ms")
        def test_unknown_option(rtrace_server):
            pass

        @pytest.mark.rtrace(fail_on="sometimes")
        def test_bad_level(rtrace_server):
            pass

        @pytest.mark.rtrace(latency="soon")
        def test_bad_value(rtrace_server):
            pass

        @pytest.mark.rtrace(vad_rms=0.05)
        def test_old_name(rtrace_server):
            pass
        """
    )
    result = users.runpytest()
    result.assert_outcomes(failed=1, errors=4)
    out = result.stdout.str()
    assert "the test's own failure" in out
    assert "Captured rtrace call" in out and "RT101 deleted-function-call-output" in out
    assert "rtrace: unknown option latncy (known: " in out
    assert "rtrace: fail_on='sometimes': give one of error, warning, info, never" in out
    assert "rtrace: --latency soon: not a duration" in out
    assert "rtrace: vad_rms is now vad_threshold (each option keeps the name of its `rtrace serve` option)" in out


def test_nothing_is_left_running_threads_loops_or_ports(users: pytest.Pytester, tmp_path: Path) -> None:
    ports = tmp_path / "ports.txt"
    users.makepyfile(
        test_leaks=f"""
        import pytest
        from clients import achat, chat

        def test_sync(rtrace_server):
            open({str(ports)!r}, "a").write(f"{{rtrace_server.port}}\\n")
            chat(rtrace_server.realtime_url)

        @pytest.mark.asyncio
        async def test_async(rtrace_server):
            import asyncio
            open({str(ports)!r}, "a").write(f"{{rtrace_server.port}}\\n")
            await achat(rtrace_server.realtime_url)
            rtrace_server.close()
            # the server never ran on the test's loop: only the test's own task is there
            assert asyncio.all_tasks() == {{asyncio.current_task()}}

        def test_left_open(rtrace_server):
            # a client the test never closes: the server's stop closes it
            from websockets.sync.client import connect
            open({str(ports)!r}, "a").write(f"{{rtrace_server.port}}\\n")
            test_left_open.ws = connect(rtrace_server.realtime_url)
        """
    )
    before = {t.ident for t in threading.enumerate()}
    result = users.runpytest()
    result.assert_outcomes(passed=3)
    left = [t.name for t in threading.enumerate() if t.ident not in before and t.is_alive()]
    assert not [name for name in left if name.startswith("rtrace")], left
    for port in map(int, ports.read_text().split()):
        with socket.socket() as sock:
            # no socket listens there any more (SO_REUSEADDR only passes over connections in TIME_WAIT)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(("127.0.0.1", port))
            sock.listen()


def test_the_plugin_imports_no_event_loop_or_websockets_at_start_up(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_modules="""
        import sys

        def test_nothing_heavy_was_imported():
            heavy = [m for m in ("asyncio", "websockets", "rich", "orjson", "rtrace.net", "rtrace.engine")
                     if m in sys.modules]
            assert heavy == []
            assert "rtrace.integrations.pytest_plugin" in sys.modules
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:asyncio", "-p", "no:anyio", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__, "-v"]))


def test_python_numbers_are_seconds_and_text_takes_the_duration_grammar() -> None:
    from rtrace.integrations.pytest_plugin import _cli_value
    from rtrace.net.link.server import options_from_cli

    assert _cli_value("latency", 0.05, None) == ["0.05s"]  # type: ignore[arg-type]
    assert _cli_value("latency", ["50ms", 0.1], None) == ["50ms", "0.1s"]  # type: ignore[arg-type]
    assert _cli_value("jitter", 0, None) == ["0s"]  # type: ignore[arg-type]
    assert options_from_cli(latency=_cli_value("latency", 0.05, None)).latency == 0.05  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="--latency 50: a duration needs a unit"):
        options_from_cli(latency=_cli_value("latency", "50", None))  # type: ignore[arg-type]


def test_the_marker_takes_every_serve_option_by_its_field_and_the_docs_name_each() -> None:
    """The marker's options are `rtrace serve`'s (`ENDPOINT_OPTIONS`, less what the plugin fixes): a new option
    (a new fault) reaches tests without an edit here, and README or docs/ must name it."""
    import re

    from rtrace.integrations.pytest_plugin import _cli_value, marker_options
    from rtrace.net.fake.options import ENDPOINT_OPTIONS
    from rtrace.net.faults.flags import FAULTS

    from .test_docs_site import hooks

    assert marker_options() == [o.field for o in ENDPOINT_OPTIONS if o.field not in ("host", "port", "record")]
    assert {f.field for f in FAULTS} <= set(marker_options())
    assert _cli_value("drop_on", "response.create", None) == ["response.create"]  # type: ignore[arg-type]
    assert _cli_value("fail_response", 2, None) == [2]  # type: ignore[arg-type]
    assert _cli_value("expire_after", 10, None) == "10s"  # type: ignore[arg-type]
    root = Path(__file__).resolve().parent.parent
    docs = (root / "README.md").read_text() + "".join(p.read_text() for p in sorted((root / "docs").glob("*.md")))
    docs += hooks().fault_reference()  # a fault's marker key: the generated fault reference (rtrace.net.faults.actions)
    assert [o for o in marker_options() if not re.search(rf"`{o}\b", docs)] == []


def test_a_test_failing_for_its_own_reason_gets_every_finding_the_faults_and_the_trace(users: pytest.Pytester) -> None:
    """The client raises (an injected drop: websockets' ConnectionClosedError): the failure shows rtrace's section,
    with the warning that explains it, the fault that fired and the kept trace, below the test's own traceback."""
    users.makepyfile(
        test_dropped="""
        import json

        import pytest
        from websockets.sync.client import connect

        from clients import CALL, OUTPUT, _until

        @pytest.mark.rtrace(drop_on=["conversation.item.create:function_call_output"])
        def test_the_client_raises(rtrace_server):
            with connect(rtrace_server.realtime_url) as ws:
                _until(ws, "session.created")
                for item in (CALL, OUTPUT):
                    ws.send(json.dumps({"type": "conversation.item.create", "item": item}))
                _until(ws, "conversation.item.done")
                _until(ws, "conversation.item.done")  # never comes: the socket is dropped
        """
    )
    result = users.runpytest()
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert "ConnectionClosedError" in out  # the test's own error stays the test's
    result.stdout.fnmatch_lines(
        [
            "*Captured rtrace call*",
            "rtrace: * finding* in this test's session so far; trace kept at *rtrace.jsonl",
            "*warning *RT1* conn 1  lines *",
            "faults that fired: 1",
            "  line *, conn 1: drop-on conversation.item.create:function_call_output (on the client's "
            "conversation.item.create)",
        ]
    )
    assert "UnreadableInput" not in out and "INTERNALERROR" not in out


def test_a_fixture_that_saw_no_connection_says_so_and_fails_nothing_of_its_own(users: pytest.Pytester) -> None:
    users.makepyfile(
        test_unconnected="""
        def test_fails_before_connecting(rtrace_server):
            assert False, "the test's own failure"

        def test_never_connects(rtrace_server):
            assert rtrace_server.findings == [] and not rtrace_server.connected
        """
    )
    result = users.runpytest("-rA")
    result.assert_outcomes(passed=1, failed=1)  # no error at teardown, no failure of the plugin's own
    out = result.stdout.str()
    assert "the test's own failure" in out
    result.stdout.fnmatch_lines(["rtrace: no client connected to the fake endpoint (ws://127.0.0.1:*) in this test*"])
    assert "UnreadableInput" not in out and "No such file" not in out


def test_the_tls_option_serves_wss_and_names_what_a_client_trusts(
    users: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("RTRACE_TLS_DIR", str(tmp_path / "tls"))
    users.makepyfile(
        test_tls="""
        import pytest
        from clients import chat

        @pytest.mark.rtrace(tls=True)
        def test_wss(rtrace_server, monkeypatch):
            assert rtrace_server.url.startswith("wss://127.0.0.1:")
            assert rtrace_server.base_url.startswith("https://127.0.0.1:")
            env = rtrace_server.env
            ca = str(rtrace_server.ca_file)
            assert env["SSL_CERT_FILE"] == env["NODE_EXTRA_CA_CERTS"] == env["REQUESTS_CA_BUNDLE"] == ca
            monkeypatch.setenv("SSL_CERT_FILE", ca)  # what a client in a subprocess is given
            assert chat(rtrace_server.realtime_url)

        def test_ws_by_default(rtrace_server):
            assert rtrace_server.url.startswith("ws://") and rtrace_server.ca_file is None
            assert "SSL_CERT_FILE" not in rtrace_server.env
            assert chat(rtrace_server.realtime_url)
        """
    )
    users.runpytest("-v").assert_outcomes(passed=2)
    assert (tmp_path / "tls" / "ca.pem").is_file()


def test_a_hunt_in_a_test_finds_its_latency_bug_shrunk_with_its_rate_on_the_markers_script(
    users: pytest.Pytester,
) -> None:
    """`@pytest.mark.rtrace(hunt=..., script=...)`: the test is the command of a hunt (a child pytest per run, against
    the hunt's server); it fails with the bugs found. The client (tests/sweep_client.py) deletes its tool output when
    the ack takes over 30 ms, and gives up on any close. The test's script is the base of every run (the client
    needs its tool called, or exits 3: without the script the clean run fails), and each bug's command re-runs it
    with that script. (One hunt for both: a second 30 s hunt without a script proved nothing more; the hunt through
    a link below has none.)"""
    client = Path(__file__).parent / "sweep_client.py"
    users.makefile(".toml", agent='[[turn]]\nwhen = { user = "weather" }\ncall = { name = "get_forecast" }\n')
    users.makepyfile(
        test_agent=f"""
        import os, subprocess, sys
        import pytest

        @pytest.mark.rtrace(hunt="30s", hunt_runs=2, script="agent.toml")
        def test_agent(rtrace_server):
            env = {{**os.environ, **rtrace_server.env, "SWEEP_CLIENT_TOOL": "get_forecast"}}
            assert subprocess.run([sys.executable, {str(client)!r}], env=env).returncode == 0
        """
    )
    result = users.runpytest("-p", "no:cacheprovider", "--rtrace-traces", "traces")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*rtrace hunt: * runs * seed 0; stopped: budget*", "*clean run: exit 0, no finding*"])
    result.stdout.fnmatch_lines(["*bug *: RT101 deleted-function-call-output (error)*",
                                 "*minimal schedule: ack latency *ms on every server event*",
                                 "*reproduced ?/? runs*"])  # fmt: skip  # a rate: cut re-runs do not count
    result.stdout.fnmatch_lines(["*reproduce: rtrace hunt --script *agent.toml --schedule *bug-1.toml --runs 2 -- *"])
    out = result.stdout.str()
    command = next(line for line in out.splitlines() if "reproduce: rtrace hunt --script" in line)
    assert "-m pytest" in command and "test_agent.py::test_agent" in command


def test_ctrl_c_stops_a_hunt_in_a_test_within_seconds_and_shows_what_it_found(tmp_path: Path) -> None:
    """One SIGINT to pytest while its hunt's clean run goes on (the test hangs): the run in flight ends, the partial
    report is printed, pytest stops; no child is left."""
    import signal
    import sys

    from .test_net_hunt_processes import gone, signalled

    pidfile = tmp_path / "pid"
    (tmp_path / "test_slow.py").write_text(
        "import os, subprocess, pytest\n"
        "@pytest.mark.rtrace(hunt='5m')\n"
        "def test_slow(rtrace_server):\n"
        f"    subprocess.run(['sh', '-c', 'echo $$ > {pidfile}; exec sleep 60'])\n"
    )
    argv = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "--rtrace-traces", str(tmp_path / "t"),
            str(tmp_path / "test_slow.py")]  # fmt: skip
    _, took, out, err, pid = signalled(signal.SIGINT, argv, pidfile, tmp_path)
    text = out + err
    assert took < 8, text  # the run in flight ends at once; pytest then reports and exits
    assert "interrupted (SIGINT): a partial report" in text and "KeyboardInterrupt" in text
    assert gone(pid)


def test_a_hunt_that_does_not_end_after_ctrl_c_is_ended_within_the_grace_and_kills_its_runs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Ctrl-C while a hunt runs in a test, and the hunt does not end (its stop never reaches the run in flight):
    `STOP_GRACE` later pytest gets its KeyboardInterrupt and the run's process is killed; neither waits on the
    hunt's thread nor for the run's own end."""
    import asyncio
    import os
    import signal
    import time
    import types

    from rtrace.integrations import pytest_plugin
    from rtrace.net.hunt import hunt as hunt_module
    from rtrace.net.hunt.processes import Stopper, run_process

    from .test_net_hunt_processes import gone

    started: list[int] = []

    def stubborn(command: list[str], options: object, progress: object, signals: bool) -> None:
        async def main() -> None:  # a run that ignores the stop: it ends when its process is killed
            await run_process(["sh", "-c", "exec sleep 7.913"], dict(os.environ), None, stderr=None,
                              echo=False)  # fmt: skip

        asyncio.run(main())

    def interrupt() -> None:
        deadline = time.monotonic() + 10
        while not started and time.monotonic() < deadline:
            for pid in os.listdir("/proc"):  # the run's process, once it is up
                if pid.isdigit() and b"sleep\x007.913" in _cmdline(int(pid)):
                    started.append(int(pid))
            time.sleep(0.05)
        signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGINT)

    monkeypatch.setattr(hunt_module, "hunt", stubborn)
    monkeypatch.setattr(pytest_plugin, "STOP_GRACE", 0.5, raising=False)
    item = types.SimpleNamespace(config=types.SimpleNamespace(pluginmanager=types.SimpleNamespace(
        get_plugin=lambda name: None)))  # fmt: skip
    threading.Thread(target=interrupt, daemon=True).start()
    begun = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        pytest_plugin._hunted(item, ["x"], object(), Stopper())  # type: ignore[arg-type]
    assert started and time.monotonic() - begun < 6
    assert gone(started[0])


def _cmdline(pid: int) -> bytes:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read()
    except OSError:
        return b""


def test_a_hunt_in_a_test_through_a_link_to_an_upstream(users: pytest.Pytester) -> None:
    """`@pytest.mark.rtrace(hunt=..., upstream=URL)`: `rtrace hunt --upstream` for one test; every run through a
    link to the upstream (here a plain serve on 127.0.0.1), the bug found as without it. Without `hunt`, or with a
    fault only the fake model makes, the setup fails saying so."""
    from .test_net_link_upstream import Upstream

    client = Path(__file__).parent / "sweep_client.py"
    with Upstream() as url:
        users.makepyfile(
            test_agent=f"""
            import os, subprocess, sys
            import pytest

            @pytest.mark.rtrace(hunt="30s", hunt_runs=1, upstream={url!r})
            def test_agent(rtrace_server):
                done = subprocess.run([sys.executable, {str(client)!r}], env={{**os.environ, **rtrace_server.env}})
                assert done.returncode == 0

            @pytest.mark.rtrace(upstream={url!r})
            def test_once(rtrace_server):
                pass

            @pytest.mark.rtrace(hunt="6s", upstream={url!r}, fail_response=[1])
            def test_model_fault(rtrace_server):
                pass
            """
        )
        result = users.runpytest("-p", "no:cacheprovider", "--rtrace-traces", "traces")
    result.assert_outcomes(failed=1, errors=2)
    result.stdout.fnmatch_lines(["*clean run: exit 0, no finding*", "*bug *: RT101 deleted-function-call-output*"])
    result.stdout.fnmatch_lines(["*reproduce: rtrace hunt --upstream ws://127.0.0.1:* --schedule *"])
    out = result.stdout.str()
    assert "upstream= hunts through a link: give hunt= too" in out
    assert "--fail-response: only the fake endpoint can make this fault" in out
