"""End to end: the documented Vitest `globalSetup` (tests/e2e/node/vitest/rtrace.globalSetup.mjs, README "Use rtrace in
your tests") with a test of an agents-js agent (agent.test.mjs): `rtrace serve --exit-with-findings` for the whole
run, its URL given to the tests, its report at the end. A clean session passes; a run whose test passes but whose
session has an error-severity finding (agents-js replays a reconnect without the function call: RT105) fails."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import NODE_E2E, client_node

pytestmark = pytest.mark.e2e

VITEST = NODE_E2E / "node_modules" / "vitest" / "vitest.mjs"


def vitest(extra_serve_args: str = "") -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "RTRACE": str(Path(sys.executable).parent / "rtrace"), "NO_COLOR": "1", "CI": "1"}
    env["RTRACE_SERVE_ARGS"] = extra_serve_args
    return subprocess.run(
        [str(client_node()), str(VITEST), "run", "--root", "vitest"],
        cwd=NODE_E2E,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def kept_trace(output: str) -> Path | None:
    marker = "rtrace serve: trace kept at "
    return Path(output.split(marker)[1].split()[0]) if marker in output else None


def test_a_clean_run_passes() -> None:
    done = vitest()
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    assert "1 passed" in out and "rtrace found problems" not in out
    assert kept_trace(out) is None  # no finding: the temporary trace is gone


def test_a_run_whose_session_has_an_error_finding_fails_with_the_report() -> None:
    # close while the tool runs (after the call's response.done, code 1011): agents-js reconnects and replays
    # without the call, then the model calls the tool again and the test's own assertion passes
    done = vitest("--drop-after response.done:function_call --close-code 1011")
    out = done.stdout + done.stderr
    trace = kept_trace(out)
    try:
        assert done.returncode == 1, out
        assert "1 passed" in out, out
        assert "rtrace found problems in this run's realtime sessions" in out
        assert "error RT105 function-call-lost-on-reconnect conn 2" in out  # the live line, while the run went on
        assert "error   RT105 function-call-lost-on-reconnect  conn 2" in out  # the report at the end
        assert trace is not None and trace.exists()
    finally:
        if trace is not None:
            trace.unlink(missing_ok=True)
