"""Shared fixtures: paths to the bundled traces, and a builder for small synthetic traces."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

# `make fuzz`: HYPOTHESIS_PROFILE=long gives properties without their own max_examples many more examples.
settings.register_profile(
    "long", max_examples=3000, deadline=None, suppress_health_check=list(HealthCheck), print_blob=True
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "sample_traces"
REAL = SAMPLES / "real"


@pytest.fixture
def real_traces() -> Path:
    return REAL


def client_python(version: str) -> Path:
    """The e2e venv's interpreter, or a skip when it was not made (only outside `make test`, which makes them)."""
    python = ROOT / f".venv-e2e-{version}" / "bin" / "python"
    if not python.exists():
        if os.environ.get("CI"):
            pytest.fail(f"{python} is missing: `make test` should have made it (make e2e-envs)")
        pytest.skip(f"{python.parent.parent.name} not made: run `make e2e-envs` (make test makes it)")
    return python
