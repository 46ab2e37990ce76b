"""The fake endpoint's options, declared once: what the declaration itself must hold (its consumers are held by
tests/test_cli_serving.py and tests/test_integrations_pytest_plugin.py)."""

from __future__ import annotations

import subprocess
import sys

from rtrace.net.faults import FAULTS
from rtrace.net.options import DURATION_KINDS, ENDPOINT_OPTIONS, LIST_KINDS, OPTION_BY_FIELD


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
    code = "import sys, rtrace.net.options; print([m for m in ('asyncio', 'websockets') if m in sys.modules])"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "[]", done.stderr
