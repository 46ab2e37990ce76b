"""`--intercept` (rtrace/net/link/intercept.py): a CONNECT proxy on loopback that answers the realtime hosts with
rtrace's authority and hands every other tunnel through untouched. Only loopback is used: the tunnel to another host
goes to a local echo server by the proxy's `opener`."""

from __future__ import annotations

import asyncio
import json
import os
import ssl
import subprocess
import sys
from pathlib import Path

import pytest
from websockets.asyncio.client import connect

from rtrace.net.link.intercept import InterceptOptions, is_realtime_host, run_intercept, split_target
from rtrace.net.link.server import ServerOptions, run_server

HERE = Path(__file__).parent


def test_the_realtime_hosts_and_the_tunnel_targets() -> None:
    assert is_realtime_host("api.openai.com") and is_realtime_host("My-Res.openai.azure.com")
    assert is_realtime_host("x.cognitiveservices.azure.com") and not is_realtime_host("api.openai.com.evil.test")
    assert not is_realtime_host("example.test") and not is_realtime_host("a/b.openai.azure.com")
    assert split_target("api.openai.com:443") == ("api.openai.com", 443) and split_target("[::1]:8443") == ("::1", 8443)
    assert split_target("nohost") is None and split_target("h:99999") is None


async def _echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    while data := await reader.read(100):
        writer.write(data.upper())
    writer.close()


def test_a_realtime_host_is_answered_here_and_another_is_piped_untouched(tmp_path: Path) -> None:
    async def main() -> None:
        echo = await asyncio.start_server(_echo, "127.0.0.1", 0)
        echo_port = echo.sockets[0].getsockname()[1]
        opened: list[tuple[str, int]] = []

        async def opener(host: str, port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
            opened.append((host, port))
            return await asyncio.open_connection("127.0.0.1", echo_port)

        async with run_server(ServerOptions(record=tmp_path / "serve.jsonl")) as srv:
            options = InterceptOptions(srv.port, folder=tmp_path / "tls", opener=opener)
            async with run_intercept(options) as proxy:
                env = proxy.env()
                assert env["https_proxy"] == proxy.url and env["NODE_EXTRA_CA_CERTS"].endswith("ca.pem")
                trust = ssl.create_default_context(cafile=env["SSL_CERT_FILE"])
                url = "wss://api.openai.com/v1/realtime?model=gpt-realtime"
                async with connect(url, proxy=proxy.url, ssl=trust) as ws:
                    assert json.loads(await ws.recv())["type"] == "session.created"
                # another host: a byte pipe to it (here, the echo server the opener reaches)
                reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
                writer.write(b"CONNECT example.test:443 HTTP/1.1\r\nHost: example.test:443\r\n\r\n")
                assert (await reader.readuntil(b"\r\n\r\n")).startswith(b"HTTP/1.1 200")
                writer.write(b"hello")
                assert await reader.readexactly(5) == b"HELLO"
                writer.close()
                # anything but CONNECT is refused
                reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
                writer.write(b"GET http://example.test/ HTTP/1.1\r\nHost: example.test\r\n\r\n")
                assert (await reader.read()).startswith(b"HTTP/1.1 405")
                assert proxy.tunnels == [("api.openai.com", 443, True), ("example.test", 443, False)]
        assert opened == [("example.test", 443)]
        echo.close()

    asyncio.run(main())
    assert (tmp_path / "tls" / "hosts" / "api.openai.com.pem").is_file()


def test_hunt_intercept_reaches_a_client_whose_url_is_hard_coded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A client on `websockets` whose URL is `wss://api.openai.com/v1` (tests/hardcoded_client.py), run unchanged:
    `rtrace hunt --intercept` gives it `https_proxy` and the authority, and finds its planted bug."""
    monkeypatch.setenv("RTRACE_TLS_DIR", str(tmp_path / "tls"))
    for name in ("https_proxy", "HTTPS_PROXY", "no_proxy", "NO_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
    out = tmp_path / "hunt.json"
    cmd = [sys.executable, "-m", "rtrace", "hunt", "--intercept", "--runs", "1", "--repro-runs", "1",
           "--shrink-runs", "1", "--max-bugs", "1", "--out", str(tmp_path / "h"), "-o", str(out), "--",
           sys.executable, str(HERE / "hardcoded_client.py")]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, env=os.environ, timeout=120)
    assert done.returncode == 1, done.stderr
    doc = json.loads(out.read_text(encoding="utf-8"))
    assert doc["baseline"]["exit"] == "exit 0" and [b["rule"] for b in doc["bugs"]] == ["RT101"], doc
    assert "--intercept" in doc["bugs"][0]["command"]


@pytest.mark.parametrize("command", ["record", "serve"])
def test_record_intercept_records_a_client_that_asked_for_the_real_host(command: str, tmp_path: Path) -> None:
    """`rtrace record --intercept` (and `serve --upstream --intercept`): the printed https_proxy and authority take
    a client that connects to `wss://api.openai.com/v1/realtime` to the recorder (here in front of a plain serve),
    which records it."""
    import signal

    from .test_net_link_upstream import Upstream, records

    trace = tmp_path / "t.jsonl"
    env = {**os.environ, "RTRACE_TLS_DIR": str(tmp_path / "tls")}
    with Upstream() as url:
        out = ["-o", str(trace)] if command == "record" else ["--record", str(trace)]
        cmd = [sys.executable, "-m", "rtrace", command, "--upstream", url, *out, "--intercept"]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        try:
            assert proc.stdout is not None
            lines: list[str] = []
            while not lines or "Ctrl-C" not in lines[-1]:
                lines.append(proc.stdout.readline())
                assert lines[-1], "".join(lines)
            given = dict(line.strip().split("=", 1) for line in lines if line.strip().startswith(("https", "SSL")))

            async def client() -> str:
                trust = ssl.create_default_context(cafile=given["SSL_CERT_FILE"])
                wss = "wss://api.openai.com/v1/realtime?model=gpt-realtime"
                async with connect(wss, proxy=given["https_proxy"], ssl=trust) as ws:
                    return str(json.loads(await ws.recv())["type"])

            assert asyncio.run(client()) == "session.created"
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(20)
    assert [r["event"]["type"] for r in records(trace) if r["dir"] == "server"][:1] == ["session.created"]
