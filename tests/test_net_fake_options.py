"""The fake endpoint's options, declared once: what the declaration itself must hold (its consumers are held by
tests/test_cli_serving.py and tests/test_integrations_pytest_plugin.py)."""

from __future__ import annotations

import subprocess
import sys

from rtrace.net.fake.options import DURATION_KINDS, ENDPOINT_OPTIONS, LIST_KINDS, OPTION_BY_FIELD
from rtrace.net.faults.flags import FAULTS


def test_each_option_is_declared_once_with_a_kind_the_consumers_know_and_every_fault_is_one() -> None:
    from rtrace.cli.serving import _TYPES

    fields = [o.field for o in ENDPOINT_OPTIONS]
    assert len(fields) == len(set(fields)) == len(OPTION_BY_FIELD)
    assert len({o.option for o in ENDPOINT_OPTIONS}) == len(fields)
    assert [o.field for o in ENDPOINT_OPTIONS if o.kind not in _TYPES] == []
    assert DURATION_KINDS | LIST_KINDS <= set(_TYPES)
    assert {f.field: f.kind for f in FAULTS}.items() <= {o.field: o.kind for o in ENDPOINT_OPTIONS}.items()
    for o in ENDPOINT_OPTIONS:
        assert o.help.endswith((".", ")")) and o.option.startswith("--"), o
        if o.kind in LIST_KINDS:
            assert o.default is None, o  # a list option not given is empty


def test_the_declarations_import_no_event_loop() -> None:
    """The command line builds serve's options from them at start-up: no asyncio, no websockets."""
    code = "import sys, rtrace.net.fake.options; print([m for m in ('asyncio', 'websockets') if m in sys.modules])"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "[]", done.stderr


def test_each_option_keeps_one_name_from_the_command_line_to_the_endpoint() -> None:
    """An option read into `EndpointOptions` or `ServerOptions` is the field of its own name there (`--audio-tone`
    is `audio_tone`, not `audio_tone_hz`); the rest are read with others by `options_from_cli`, a known few."""
    import dataclasses

    from rtrace.net.fake.endpoint import EndpointOptions
    from rtrace.net.link.server import ServerOptions, options_from_cli

    fields = {"endpoint": {f.name for f in dataclasses.fields(EndpointOptions)},
              "server": {f.name for f in dataclasses.fields(ServerOptions)}}  # fmt: skip
    for o in ENDPOINT_OPTIONS:
        for where in o.into:
            assert o.field in fields[where], f"{o.option} goes into {where} by another name"
    read_with_others = {o.field for o in ENDPOINT_OPTIONS if not o.into} - {f.field for f in FAULTS}
    assert read_with_others == {"latency", "jitter", "tool", "tls", "cert", "key", "script", "close_code",
                                "fault_times"}  # fmt: skip
    given = {"audio_tone": 440.0, "audio_pace": 1.0, "vad_threshold": 0.1, "transcript": ["hi"], "seed": 7,
             "duplicate_id": "ignore", "story_chunk_delay": "10ms", "first_output_delay": "300ms", "preamble": "off"}
    o = options_from_cli(**given)
    assert (o.endpoint.audio_tone, o.endpoint.audio_pace, o.endpoint.vad_threshold) == (440.0, 1.0, 0.1)
    assert (o.endpoint.transcript, o.endpoint.seed, o.seed, o.endpoint.duplicate_id) == (["hi"], 7, 7, "ignore")
    assert (o.endpoint.story_chunk_delay, o.endpoint.first_output_delay, o.endpoint.preamble) == (0.01, 0.3, False)


def test_an_old_name_of_an_option_is_refused_naming_the_new_one() -> None:
    import dataclasses

    import pytest

    from rtrace.net.fake.endpoint import EndpointOptions
    from rtrace.net.fake.options import RENAMED, renamed

    fields = {f.name for f in dataclasses.fields(EndpointOptions)}
    for old, new in RENAMED.items():
        assert old not in fields and new in fields and new in OPTION_BY_FIELD
        with pytest.raises(TypeError, match=f"EndpointOptions: {old} is now {new} "):
            EndpointOptions(**{old: 1})
    assert renamed({"audio_tone": 1, "latency": "5ms"}) is None
    assert dataclasses.replace(EndpointOptions(audio_tone=440.0), vad_threshold=0.1).vad_threshold == 0.1
