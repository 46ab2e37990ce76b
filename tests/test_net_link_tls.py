"""`--tls` (`rtrace.net.link.tls`): the certificate made and kept, or given; `wss://` behaving as `ws://` does."""

from __future__ import annotations

import asyncio
import datetime
import json
import ssl
import stat
import sys
from pathlib import Path
from typing import Any

import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from rtrace.core.loader import TraceReader
from rtrace.engine.fold import analyze_path
from rtrace.net.faults.flags import Faults
from rtrace.net.faults.script import Schedule
from rtrace.net.link import tls
from rtrace.net.link.proxy import RecordOptions, run_proxy
from rtrace.net.link.server import ServerOptions, run_server


def client_context(files: tls.TlsFiles) -> ssl.SSLContext:
    """What a client given the printed `SSL_CERT_FILE` trusts (Python 3.13's strict chain checks included)."""
    return ssl.create_default_context(cafile=str(files.ca))


def test_a_made_certificate_is_kept_and_reused(tmp_path: Path) -> None:
    first = tls.ensure("127.0.0.1", tmp_path)
    assert first.made and first.folder == tmp_path
    assert {p.name for p in tmp_path.iterdir()} == {"ca.pem", "ca-key.pem", "server.pem", "server-key.pem"}
    for key in ("ca-key.pem", "server-key.pem"):
        assert stat.S_IMODE((tmp_path / key).stat().st_mode) == 0o600
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    again = tls.ensure("localhost", tmp_path)
    assert not again.made and {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before
    assert (again.cert, again.key, again.ca) == (first.cert, first.key, first.ca)


def test_a_new_host_or_an_ending_certificate_is_made_again_under_the_same_authority(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from cryptography import x509

    tls.ensure("127.0.0.1", tmp_path)
    ca = (tmp_path / "ca.pem").read_bytes()
    other = tls.ensure("10.1.2.3", tmp_path)
    assert other.made and (tmp_path / "ca.pem").read_bytes() == ca
    leaf = x509.load_pem_x509_certificate(other.cert.read_bytes())
    names = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert {str(v) for v in names.get_values_for_type(x509.IPAddress)} == {"127.0.0.1", "::1", "10.1.2.3"}
    assert names.get_values_for_type(x509.DNSName) == ["localhost"]
    assert not tls.ensure("0.0.0.0", tmp_path).made  # a wildcard bind adds no name
    monkeypatch.setattr(tls, "_RENEW", datetime.timedelta(days=400))  # every kept certificate now ends too soon
    assert tls.ensure("127.0.0.1", tmp_path).made and (tmp_path / "ca.pem").read_bytes() == ca


def test_the_folder_is_the_environments(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RTRACE_TLS_DIR", str(tmp_path / "mine"))
    assert tls.tls_dir() == tmp_path / "mine"
    monkeypatch.delenv("RTRACE_TLS_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert tls.tls_dir() == tmp_path / "cache" / "rtrace" / "tls"


def test_without_cryptography_the_message_names_the_extra(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "cryptography", None)
    with pytest.raises(tls.TlsError, match=r"pip install 'rtrace-cli\[tls\]'.*--cert FILE --key FILE"):
        tls.ensure("127.0.0.1", tmp_path)


def test_given_files_are_checked_at_start(tmp_path: Path) -> None:
    made = tls.ensure("127.0.0.1", tmp_path / "made")
    given = tls.tls_files(False, str(made.cert), str(made.key), "127.0.0.1")
    assert given is not None and given.ca == made.cert and given.folder is None
    with pytest.raises(tls.TlsError, match="--cert and --key go together"):
        tls.tls_files(True, str(made.cert), None, "127.0.0.1")
    with pytest.raises(tls.TlsError, match=r"--cert .*: no such file"):
        tls.given(tmp_path / "nope.pem", made.key)
    (tmp_path / "junk.pem").write_text("not a certificate")
    with pytest.raises(tls.TlsError, match="not a certificate chain and its private key"):
        tls.given(tmp_path / "junk.pem", made.key)
    assert tls.tls_files(False, None, None, "127.0.0.1") is None


async def _recv(ws: Any) -> dict[str, Any]:
    return json.loads(await asyncio.wait_for(ws.recv(), 5))


@pytest.mark.parametrize(("close_code", "seen"), [(None, 1006), (1011, 1011), (1000, 1000)])
def test_wss_handshake_close_codes_and_a_drop_are_as_on_ws(
    close_code: int | None, seen: int, tmp_path: Path
) -> None:
    files = tls.ensure("127.0.0.1", tmp_path / "tls")
    trace = tmp_path / "t.jsonl"
    faults = Faults(drop_on=["conversation.item.create"], close_code=close_code)
    options = ServerOptions(tls=files, record=trace, schedule=Schedule.of(faults))

    async def main() -> None:
        async with run_server(options) as srv:
            assert srv.url.startswith("wss://127.0.0.1:") and srv.http_url.startswith("https://127.0.0.1:")
            with pytest.raises(ssl.SSLCertVerificationError):  # a client that was not told to trust it
                async with connect(srv.realtime_url, ssl=ssl.create_default_context()):
                    pass
            async with connect(srv.realtime_url, ssl=client_context(files), subprotocols=["realtime"]) as ws:
                assert ws.subprotocol == "realtime"
                assert (await _recv(ws))["type"] == "session.created"
                item = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}
                await ws.send(json.dumps({"type": "conversation.item.create", "item": item}))
                with pytest.raises(ConnectionClosed):
                    await _recv(ws)
                assert ws.close_code == seen

    asyncio.run(asyncio.wait_for(main(), 20))
    closed = [r.event for r in TraceReader.open(trace) if r.type == "connection.closed"]
    assert closed[-1]["by"] == "server" and closed[-1].get("code") == (close_code or 1006)
    assert analyze_path(trace).problem_count == 0


def test_record_listens_on_wss_in_front_of_a_ws_upstream(tmp_path: Path) -> None:
    files = tls.ensure("127.0.0.1", tmp_path / "tls")
    trace = tmp_path / "rec.jsonl"

    async def main() -> None:
        async with run_server() as srv:
            options = RecordOptions(upstream=srv.url, output=trace, tls=files)
            async with run_proxy(options) as proxy:
                assert proxy.url.startswith("wss://") and proxy.http_url.startswith("https://")
                async with connect(f"{proxy.url}/realtime?model=gpt-realtime", ssl=client_context(files)) as ws:
                    assert (await _recv(ws))["type"] == "session.created"

    asyncio.run(asyncio.wait_for(main(), 20))
    kinds = [(r.dir, r.type) for r in TraceReader.open(trace)]
    assert ("server", "session.created") in kinds and kinds[-1] == ("meta", "connection.closed")


def test_a_certificate_per_intercepted_host_signed_by_the_same_authority(tmp_path: Path) -> None:
    """`for_host` (`--intercept`): a leaf naming the host, signed by serve's authority, kept and reused; the trust
    bundle holds the authority and the system's own."""
    server = tls.ensure("127.0.0.1", tmp_path)
    leaf = tls.for_host("api.openai.com", tmp_path)
    assert leaf.made and leaf.ca == server.ca and leaf.cert == tmp_path / "hosts" / "api.openai.com.pem"
    assert stat.S_IMODE(leaf.key.stat().st_mode) == 0o600
    assert not tls.for_host("api.openai.com", tmp_path).made
    odd = tls.for_host("x/../Evil Host.openai.azure.com", tmp_path)
    assert odd.cert.parent == tmp_path / "hosts"  # a name never leaves the folder
    bundle = tls.trust_bundle(leaf)
    assert bundle.read_bytes().startswith(server.ca.read_bytes())

    async def handshake() -> str:
        server_side = await asyncio.start_server(lambda r, w: w.close(), "127.0.0.1", 0, ssl=leaf.context())
        port = server_side.sockets[0].getsockname()[1]
        try:
            trust = ssl.create_default_context(cafile=str(bundle))
            _, writer = await asyncio.open_connection("127.0.0.1", port, ssl=trust, server_hostname="api.openai.com")
            name = writer.get_extra_info("peercert")["subject"][0][0][1]
            writer.close()
            return str(name)
        finally:
            server_side.close()

    assert asyncio.run(handshake()) == "api.openai.com"
