"""The network commands' options, checked before anything starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from rtrace.cli import main

from .conftest import REAL
from .test_cli_common import assert_usage_error

RACE_189 = REAL / "tool-output-race.livekit-1.8.9.jsonl"


def test_serve_and_sweep_check_their_options_and_script_before_starting(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = tmp_path / "bad.toml"
    script.write_text('[[turn]]\nwhen = { user = "x" }\n\nclose = 1015\n')
    assert main(["serve", "--script", str(script)]) == 2
    err = capsys.readouterr().err
    assert f"{script}:4: turn 1: `close` must be a close code" in err and "Traceback" not in err
    script.write_text("[[turn]\n")
    assert main(["sweep", "--runs", "1", "--script", str(script), "--", "true"]) == 2
    assert f"{script}:1:" in capsys.readouterr().err
    assert main(["serve", "--close-code", "1015"]) == 2
    assert "--close-code 1015" in capsys.readouterr().err
    assert main(["serve", "--tool", "x=[1]"]) == 2
    assert "must be a JSON object" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["serve", "--drop-on", "bogus.type"], "--drop-on bogus.type: 'bogus.type' is not a client event"),
        (["serve", "--latency", "foo=50ms"], "--latency foo: 'foo' is not a server event"),
        (["serve", "--drop-on", "conversation.item.creat"], "(did you mean conversation.item.create?)"),
        (["serve", "--error-on", "response.done"], "response.done is a server event; --error-on takes"),
        (["serve", "--drop-after", "conversation.item.create"], "conversation.item.create is a client event"),
        (["serve", "--drop-after", "response.done:function_cal"], "(did you mean function_call?)"),
        (["serve", "--latency", "conversation.item.created=5ms"], "the beta name of conversation.item.added"),
        (["replay", str(RACE_189), "--latency", "bogus=5ms"], "--latency bogus: 'bogus' is not a server event"),
    ],
)
def test_options_naming_event_types_are_checked_against_the_catalog(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """`serve --drop-on bogus.type` was accepted and never fired."""
    assert_usage_error(argv, message, capsys)


# -- the endpoint's options are declared once (net.fake.options.ENDPOINT_OPTIONS); every consumer reads them -----------


def _options_of(command: str) -> set[str]:
    import typer.main

    from rtrace.cli import app

    cmd = typer.main.get_command(app).commands[command]  # type: ignore[attr-defined]
    return {opt for p in cmd.params if p.param_type_name == "option" for opt in p.opts}


def test_serve_and_sweep_take_every_declared_endpoint_option() -> None:
    from rtrace.net.fake.options import ENDPOINT_OPTIONS
    from rtrace.net.faults.flags import FAULTS

    serve, sweep = _options_of("serve"), _options_of("sweep")
    assert {o.option for o in ENDPOINT_OPTIONS} <= serve
    assert {o.option for o in ENDPOINT_OPTIONS if o.sweep} <= sweep
    assert {f"--{f.name}" for f in FAULTS} <= serve & sweep  # a fault forgotten by sweep fails here
    assert {f.field for f in FAULTS} <= {o.field for o in ENDPOINT_OPTIONS}


def test_every_serve_and_sweep_option_is_named_in_the_docs() -> None:
    """README or a page under docs/ names each option (the site's CLI reference, `docs/hooks.py`, lists them all
    from the same command tree); a fault flag may be named by the generated fault reference only (`faults.md`,
    from `rtrace.net.faults.actions`)."""
    from .test_docs_site import hooks

    root = Path(__file__).resolve().parent.parent
    docs = (root / "README.md").read_text() + "".join(p.read_text() for p in sorted((root / "docs").glob("*.md")))
    docs += hooks().fault_reference()
    for command in ("serve", "sweep"):
        options = _options_of(command) - {"--help"}
        assert [o for o in options if o not in docs] == [], command


def test_each_endpoint_option_reaches_the_endpoint_by_its_field(tmp_path: Path) -> None:
    """Every declared option given on the command line arrives in `options_from_cli` (a value of its kind)."""
    import rtrace.net.link.server as server_mod
    from rtrace.net.fake.options import ENDPOINT_OPTIONS

    script = tmp_path / "s.toml"
    script.write_text('[[turn]]\nwhen = { user = "x" }\ntext = "y"\n')
    values = {"durations": "5ms", "duration": "5ms", "specs": "response.create", "numbers": "2", "count": "2",
              "int": "1011", "float": "0.5", "texts": "hello", "text": "ignore", "path": str(script)}  # fmt: skip
    special = {"port": "0", "host": "127.0.0.1", "record": str(tmp_path / "r.jsonl"), "drop_after": "response.done",
               "from_trace": str(RACE_189), "tool": "lookup", "seed": "3", "fault_times": "2",
               "preamble": "on"}  # fmt: skip
    seen: dict[str, object] = {}
    real = server_mod.options_from_cli

    def spy(**given: object) -> object:
        seen.update(given)
        raise ValueError("stop here")

    server_mod.options_from_cli = spy  # type: ignore[assignment]
    try:
        argv = ["serve"]
        for o in ENDPOINT_OPTIONS:
            argv += [o.option] if o.kind == "flag" else [o.option, special.get(o.field, values[o.kind])]
        assert main(argv) == 2
    finally:
        server_mod.options_from_cli = real
    assert set(seen) == {o.field for o in ENDPOINT_OPTIONS}
    assert all(seen[o.field] not in (None, []) for o in ENDPOINT_OPTIONS)
    real(**{k: v for k, v in seen.items() if k not in ("host", "tls", "cert", "key")})  # and the endpoint reads each


def test_tls_options_are_checked_before_starting(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    junk = tmp_path / "junk.pem"
    junk.write_text("not a certificate")
    assert main(["serve", "--cert", str(junk)]) == 2
    assert "--cert and --key go together" in capsys.readouterr().err
    assert main(["serve", "--tls", "--cert", str(junk), "--key", str(junk)]) == 2
    assert "not a certificate chain and its private key" in capsys.readouterr().err
    up = "ws://127.0.0.1:9/v1/realtime"
    assert main(["record", "--upstream", up, "-o", str(tmp_path / "t.jsonl"), "--key", str(junk)]) == 2
    assert "--cert and --key go together" in capsys.readouterr().err
    (tmp_path / "a-file").write_text("")
    monkeypatch.setenv("RTRACE_TLS_DIR", str(tmp_path / "a-file" / "tls"))
    assert main(["serve", "--tls"]) == 2
    err = capsys.readouterr().err
    assert "cannot keep the certificate in" in err and "RTRACE_TLS_DIR" in err and "Traceback" not in err


def test_serve_tls_prints_the_wss_url_and_what_each_runtime_trusts(tmp_path: Path) -> None:
    import os
    import signal
    import subprocess
    import sys

    env = {**os.environ, "RTRACE_TLS_DIR": str(tmp_path / "tls")}
    cmd = [sys.executable, "-m", "rtrace", "serve", "--tls", "--live"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stdout is not None
        lines = []
        while not lines or "Ctrl-C" not in lines[-1]:
            lines.append(proc.stdout.readline())
            assert lines[-1], "".join(lines)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(20)
    text = "".join(lines)
    assert "listening on wss://127.0.0.1:" in text and "OPENAI_BASE_URL=https://127.0.0.1:" in text
    assert f"certificate made in {tmp_path / 'tls'}" in text
    for name in ("NODE_EXTRA_CA_CERTS", "SSL_CERT_FILE", "REQUESTS_CA_BUNDLE"):
        assert f"{name}={tmp_path / 'tls' / 'ca.pem'}" in text


def test_serve_upstream_and_record_act_the_link_faults_on_a_real_upstream(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`serve --upstream URL` with a fault flag (and `record` with it): a proxy to a plain serve that answers the
    client's conversation.item.create with the injected error (withheld from the upstream), noted in its trace;
    a fault only the fake model makes is a usage error."""
    import asyncio
    import os
    import signal
    import subprocess
    import sys

    from .test_net_link_upstream import Upstream, one_turn, records

    assert main(["serve", "--upstream", "ws://127.0.0.1:9/v1", "--fail-response", "1"]) == 2
    assert "only the fake endpoint can make this fault" in capsys.readouterr().err
    assert main(["record", "--upstream", "ws://127.0.0.1:9/v1", "-o", str(tmp_path / "r.jsonl"),
                 "--script", str(tmp_path / "none.toml")]) == 2  # fmt: skip
    for command in ("serve", "record"):
        trace = tmp_path / f"{command}.jsonl"
        out = ["--record", str(trace)] if command == "serve" else ["-o", str(trace)]
        with Upstream() as url:
            cmd = [sys.executable, "-m", "rtrace", command, "--upstream", url, *out, "--error-on",
                   "conversation.item.create", "--latency", "20ms"]  # fmt: skip
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=os.environ)
            try:
                assert proc.stdout is not None
                lines: list[str] = []
                while not lines or "Ctrl-C" not in lines[-1]:
                    lines.append(proc.stdout.readline())
                    assert lines[-1], "".join(lines) + (proc.stderr.read() if proc.stderr else "")
                base = next(line for line in lines if "OPENAI_BASE_URL=" in line).split("=", 1)[1].strip()
                got, code = asyncio.run(one_turn("ws" + base[4:]))
            finally:
                proc.send_signal(signal.SIGTERM)
                proc.wait(20)
        text = "".join(lines)
        assert "on the link: latency 20ms on every server event" in text and "answer conversation.item.create" in text
        assert [e["error"]["code"] for e in got if e["type"] == "error"] == ["fault_injected"] and code is None
        notes = [r["event"] for r in records(trace) if r["event"].get("type") == "fault.injected"]
        assert [n["fault"] for n in notes] == ["error-on"], notes
