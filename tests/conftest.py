"""Shared fixtures: paths to the bundled traces, and a builder for small synthetic traces."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import NoReturn

import pytest
import rich.cells
import rich.console
import rich.markdown
import rich.padding
import rich.progress
import rich.table
import rich.text
from hypothesis import HealthCheck, settings

# Every rich module rtrace imports, imported before any test runs. rtrace imports rich only where it draws, and a
# pytester run in this process (`runpytest`) takes a snapshot of `sys.modules` and drops what was imported during it:
# rich imported first inside one would be dropped after it while a rtrace module kept from before held its console,
# and the next import would make a second `Segment` class that this console cannot draw (NotRenderableError, seen
# when a test calling `main` in process ran before the README's pytester test in one worker).
_RICH = (rich.cells, rich.console, rich.markdown, rich.padding, rich.progress, rich.table, rich.text)

# The suite's properties carry no per-example deadline: a wall-clock limit per example is a timed test, and it
# failed on a loaded machine (CI's two workers beside the real clients). `make fuzz`: HYPOTHESIS_PROFILE=long gives
# properties without their own max_examples many more examples.
settings.register_profile("suite", deadline=None)
settings.register_profile(
    "long", max_examples=3000, deadline=None, suppress_health_check=list(HealthCheck), print_blob=True
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "suite"))

#: Test files that users' suites hold, run only under pytester (tests/test_e2e_pytest_plugin.py).
collect_ignore = ["e2e/regression_7880"]

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "sample_traces"
REAL = SAMPLES / "real"


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    """A test marked `source` (it reads what only the source has: the lines rtrace executes, the annotations of
    its methods) runs in a process of its own where the fold runs from its source (`RTRACE_PURE=1`), when it is
    compiled here."""
    from rtrace import _compiled

    if pyfuncitem.get_closest_marker("source") is None or os.environ.get(_compiled.PURE_ENV):
        return None
    if not _compiled.compiled():
        return None
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", pyfuncitem.nodeid],
        cwd=pyfuncitem.config.rootpath,
        env={**os.environ, _compiled.PURE_ENV: "1"},
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    if proc.returncode != 0:
        pytest.fail(f"from source ({_compiled.PURE_ENV}=1):\n{proc.stdout[-6000:]}{proc.stderr[-2000:]}", pytrace=False)
    return True


@pytest.fixture(autouse=True)
def _output_width(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test sees the width of output that is not a terminal (120 columns), whatever COLUMNS the runner has
    (pytest-xdist workers inherit the terminal's); tests of COLUMNS set it themselves."""
    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.delenv("LINES", raising=False)


@pytest.fixture
def real_traces() -> Path:
    return REAL


def _missing(what: str) -> NoReturn:
    """A real-client environment is missing: a skip outside CI, a failure under CI (`make test` makes them all)."""
    if os.environ.get("CI"):
        pytest.fail(f"{what} is missing: `make test` should have made it (make e2e-envs)")
    pytest.skip(f"{what} not made: run `make e2e-envs` (make test makes it)")


def client_python(env: str) -> Path:
    """The interpreter of `.venv-e2e-<env>` (a livekit-agents version, or a client: `openai-agents`, `pipecat`,
    `openai`, `livekit-2.0.0b1`), or a skip when it was not made (only outside `make test`, which makes them)."""
    python = ROOT / f".venv-e2e-{env}" / "bin" / "python"
    if not python.exists():
        _missing(str(python))
    return python


#: The Node clients' packages (`make e2e-envs`: npm ci from tests/e2e/node/package-lock.json).
NODE_E2E = ROOT / "tests" / "e2e" / "node"


def client_node() -> Path:
    """The `node` that runs the Node drivers (tests/e2e/node/*.mjs) once their packages are installed, or a skip
    (a failure under CI)."""
    stamp = NODE_E2E / "node_modules" / ".installed"
    if not stamp.exists():
        _missing(str(stamp))
    node = shutil.which("node")
    if node is None:
        _missing("node (Node 20 or later, on PATH)")
    return Path(node)
