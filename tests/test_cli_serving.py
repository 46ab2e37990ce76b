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
