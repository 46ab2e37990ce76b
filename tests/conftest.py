"""Shared fixtures: paths to the bundled traces, and a builder for small synthetic traces."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "sample_traces"
REAL = SAMPLES / "real"


@pytest.fixture
def real_traces() -> Path:
    return REAL
