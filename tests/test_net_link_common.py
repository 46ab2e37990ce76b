"""What the network modules share: URLs, loopback names, running until a signal."""

from __future__ import annotations

import asyncio
import os
import re
import signal
from pathlib import Path

import pytest

from rtrace.net.link.common import (
    LOOPBACK,
    host_for_url,
    safe_url,
    trace_write_failed,
    until_stopped,
    upstream_url,
)

KEY = "sk-proj-TESTKEY0123456789abcdefSECRET"


def test_upstream_url() -> None:
    assert upstream_url("wss://api.openai.com/v1/realtime", "/v1/realtime?model=m") == (
        "wss://api.openai.com/v1/realtime?model=m"
    )
    assert upstream_url("wss://api.openai.com/v1/realtime?model=a&x=1", "/v1/realtime?model=b") == (
        "wss://api.openai.com/v1/realtime?model=b&x=1"
    )
    assert upstream_url("ws://127.0.0.1:9/v1", "/v1/realtime") == "ws://127.0.0.1:9/v1/realtime"
    assert upstream_url("wss://h.example/proxy/v1/realtime", "/v1/realtime") == "wss://h.example/proxy/v1/realtime"
    # a client of a vendor path that already holds the upstream's prefix (Azure's /openai, Voice Live's)
    azure = "wss://r.openai.azure.com/openai/v1/realtime"
    assert upstream_url(azure, "/v1/realtime?model=d") == "wss://r.openai.azure.com/openai/v1/realtime?model=d"
    assert upstream_url(azure, "/openai/v1/realtime?model=d") == "wss://r.openai.azure.com/openai/v1/realtime?model=d"
    assert upstream_url(azure, "/openai/realtime?deployment=d") == "wss://r.openai.azure.com/openai/realtime?deployment=d"
    voice = "wss://r.services.ai.azure.com/voice-live/realtime"
    assert upstream_url(voice, "/voice-live/realtime?model=m") == "wss://r.services.ai.azure.com/voice-live/realtime?model=m"


def test_safe_url_keeps_no_credentials() -> None:
    shown = safe_url(f"wss://user:{KEY}@api.example:8443/v1/realtime?model=m&api-key={KEY}")
    assert shown == "wss://api.example:8443/v1/realtime?model=m"


def test_hosts() -> None:
    assert host_for_url("::1") == "[::1]" and host_for_url("127.0.0.1") == "127.0.0.1"
    assert set(LOOPBACK) == {"127.0.0.1", "localhost", "::1"}


def test_a_trace_write_failure_is_told_on_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    trace_write_failed("No space left on device", 12, "out/t.jsonl")
    err = capsys.readouterr().err
    assert re.fullmatch(
        r"rtrace: \d\d:\d\d:\d\d: cannot write the trace out/t.jsonl any more \(No space left on device\); frames keep "
        r"passing, the trace stops after line 12\n", err
    ), err


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGHUP])
def test_until_stopped_returns_on_sigterm(stop: signal.Signals) -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        loop.call_later(0.05, os.kill, os.getpid(), stop)
        await asyncio.wait_for(until_stopped(), 5)
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            loop.remove_signal_handler(sig)

    asyncio.run(main())


def test_is_loopback_by_address_not_by_spelling() -> None:
    from rtrace.net.link.common import is_loopback

    for url in ("ws://127.0.0.1:9/v1", "ws://127.9.9.9/v1", "ws://localhost/v1", "ws://[::1]:80/v1"):
        assert is_loopback(url), url
    for url in ("ws://127.0.0.1.example/v1", "ws://10.0.0.1/v1", "ws://0.0.0.0/v1", "ws://api.example/v1", "ws://[::1/v1"):
        assert not is_loopback(url), url


def test_each_fresh_run_dir_is_new_and_an_odd_out_is_refused(tmp_path: Path) -> None:
    from rtrace.net.link.common import fresh_run_dir

    out = tmp_path / "hunts"
    assert fresh_run_dir(out) == out / "1" and fresh_run_dir(out) == out / "2"
    (out / "7").mkdir()
    (out / "bug-1.toml").write_text("")  # what an older hunt left is not in the way
    assert fresh_run_dir(out) == out / "8"
    with pytest.raises(ValueError, match=r"--out .*bug-1\.toml: a file, not a directory"):
        fresh_run_dir(out / "bug-1.toml")
    with pytest.raises(ValueError, match=r"--out .*: cannot make the directory \(a part of it is a file\)"):
        fresh_run_dir(out / "bug-1.toml" / "x")
