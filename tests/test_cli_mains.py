"""`rtrace/cli/mains.py`: what `serve`, `record` and `sweep` say to people around net's runners (the runners
replaced by ones that only announce), and a sweep's values refused before any run."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest

from rtrace.cli.mains import record_main, serve_main, sweep_main
from rtrace.net.link.proxy import RecordOptions
from rtrace.net.link.server import ServerOptions


def test_serve_on_another_host_than_loopback_warns(monkeypatch: pytest.MonkeyPatch) -> None:
    async def fake_serve(*a: Any, **k: Any) -> None:
        return None

    monkeypatch.setattr("rtrace.net.link.server.serve_forever", fake_serve)
    err = io.StringIO()
    serve_main(ServerOptions(host="0.0.0.0", port=0), out=io.StringIO(), err=err)
    assert "not loopback" in err.getvalue()
    quiet = io.StringIO()
    serve_main(ServerOptions(port=0), out=io.StringIO(), err=quiet)
    assert quiet.getvalue() == ""


def test_record_says_where_to_point_the_client_and_what_the_link_does(monkeypatch: pytest.MonkeyPatch) -> None:
    proxy = type("P", (), {"url": "ws://127.0.0.1:9/v1", "http_url": "http://127.0.0.1:9/v1"})()

    async def announce_only(options: Any, announce: Any, make: Any) -> None:
        announce(proxy, {"https_proxy": "http://127.0.0.1:8"})

    monkeypatch.setattr("rtrace.net.link.proxy.record_forever", announce_only)
    out, err = io.StringIO(), io.StringIO()
    options = RecordOptions(upstream="wss://api.example.com/v1/realtime?key=secret", output="t.jsonl", host="0.0.0.0")
    record_main(options, out, err, says=["on the link: no fault"])
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("rtrace record: listening on ws://127.0.0.1:9/v1, forwarding to wss://api.example.com")
    assert "secret" not in out.getvalue()
    assert lines[1:5] == [
        "  OPENAI_BASE_URL=http://127.0.0.1:9/v1",
        "  recording to t.jsonl",
        "  on the link: no fault",
        "  https_proxy=http://127.0.0.1:8",
    ]
    assert "not loopback" in err.getvalue()
    with pytest.raises(ValueError, match="--upstream"):
        record_main(RecordOptions(upstream="http://not-a-websocket"), out, err)


@pytest.mark.parametrize(
    ("latency", "runs", "timeout", "command", "says"),
    [
        ("0,50", 1, "5m", ["true"], "--latency"),
        ("0,50ms", 0, "5m", ["true"], "--runs"),
        ("0,50ms", 1, "0s", ["true"], "--timeout"),
        ("0,50ms", 1, "5m", ["rtrace-no-such-command-38"], "command not found"),
    ],
)
def test_a_sweep_refuses_its_values_before_any_run(
    tmp_path: Path, latency: str, runs: int, timeout: str, command: list[str], says: str
) -> None:
    with pytest.raises(ValueError, match=says):
        sweep_main(command, latency, runs, tmp_path / "out", timeout)
    assert not (tmp_path / "out").exists()


def test_replays_values_as_typed_are_read_and_refused_for_people() -> None:
    from rtrace.cli.mains import replay_divergence, replay_options
    from rtrace.net.replay.runner import ReplayResult

    options, compare = replay_options(target="http://127.0.0.1:9/v1/realtime", latency=None, speed=2.0)
    assert options.target == "ws://127.0.0.1:9/v1/realtime" and options.speed == 2.0 and compare is None
    fake, compare = replay_options(compare="https://api.example.com/v1/realtime", latency=["20ms"], own_responses=True)
    assert compare == "wss://api.example.com/v1/realtime" and fake.latency == 0.02 and not fake.recorded_responses
    for given, message in (
        ({"pace": "fast"}, "--pace 'fast': one of"),
        ({"speed": 0.0}, "--speed 0: a factor above 0"),
        ({"timeout": 0.0}, "--timeout 0: each wait needs a time above 0"),
        ({"target": "ws://127.0.0.1:9", "compare": "ws://127.0.0.1:8"}, "--compare needs --target fake"),
        ({"target": "ws://127.0.0.1:9", "latency": ["5ms"]}, "--latency is the latency of the in-process fake"),
    ):
        with pytest.raises(ValueError, match=message):
            replay_options(**given)
    assert replay_divergence(ReplayResult("a", "b", "fake", [], []), kept=False) is None


def test_a_warning_unless_only_this_machine_can_connect() -> None:
    from rtrace.cli.mains import warn_unless_loopback
    from rtrace.net.link.common import LOOPBACK

    err = io.StringIO()
    for host in LOOPBACK:
        warn_unless_loopback(host, "connect", err)
    assert err.getvalue() == ""
    warn_unless_loopback("0.0.0.0", "connect (no authentication)", err)
    assert err.getvalue() == (
        "rtrace: warning: listening on 0.0.0.0, not loopback: anyone who can reach this address can connect "
        "(no authentication).\n"
    )


def test_the_start_lines_name_the_folder_and_each_runtimes_variable(tmp_path: Path) -> None:
    from rtrace.cli.mains import announce_tls
    from rtrace.net.link import tls

    files = tls.ensure("127.0.0.1", tmp_path)
    out = io.StringIO()
    announce_tls(files, out)
    text = out.getvalue()
    assert f"certificate made in {tmp_path}" in text
    for name in ("NODE_EXTRA_CA_CERTS", "SSL_CERT_FILE", "REQUESTS_CA_BUNDLE"):
        assert f"  {name}={files.ca}    # " in text
    out = io.StringIO()
    announce_tls(tls.ensure("127.0.0.1", tmp_path), out)
    assert "certificate reused in" in out.getvalue()


def test_the_private_keys_never_reach_the_start_lines(tmp_path: Path) -> None:
    from rtrace.cli.mains import announce_tls
    from rtrace.net.link import tls

    files = tls.ensure("127.0.0.1", tmp_path)
    out = io.StringIO()
    announce_tls(files, out)
    key = files.key.read_text()
    assert "PRIVATE KEY" in key and "PRIVATE KEY" not in out.getvalue() and str(files.key) not in out.getvalue()
    assert files.key.name == "server-key.pem"
