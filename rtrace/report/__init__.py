"""Renderers of one `analysis.Report`: terminal, JSON (and the formats later issues add).

Each renderer is a function `render(report, ...)`; none of them reads the trace again unless it says so.
"""

from __future__ import annotations

from enum import Enum


class Format(str, Enum):
    terminal = "terminal"
    json = "json"
