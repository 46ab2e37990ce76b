"""Live findings beside a recorder (`serve --live`, `record --live`, `serve --exit-with-findings`): the recorder's
writer hands each line it writes to a `engine.live.LiveFold`, which prints each finding to `err` the moment it is
certain. Without a trace file of the user's, the recording goes to a temporary one, kept only when it has
findings (so a report can cite its lines).
"""

from __future__ import annotations

import dataclasses
import os
import sys
import tempfile
from collections.abc import Callable
from typing import IO

from ..core.writer import Tap
from ..engine.fold import TraceReport
from ..engine.live import LiveFold, finding_line
from ..rules.base import Config, Finding


@dataclasses.dataclass
class Watched:
    """What a watched recording left: the report of its trace, and where the trace is (None: removed, it was a
    temporary file with no finding)."""

    report: TraceReport
    trace: str | None


def watch(
    run: Callable[[str, Tap], None],
    record: str | os.PathLike[str] | None,
    live: bool,
    err: IO[str] = sys.stderr,
    config: Config | None = None,
) -> Watched:
    """`run(path, tap)` records to `path` (the user's `record`, or a temporary file) with `tap` as the writer's
    hook; with `live`, each finding is printed to `err` as it becomes certain, those only the end made certain
    once the recording has ended."""
    temporary = record is None
    if record is None:
        fd, path = tempfile.mkstemp(prefix="rtrace-", suffix=".jsonl")
        os.close(fd)
    else:
        path = os.fspath(record)

    def told(finding: Finding, at_end: bool) -> None:
        if live:
            print(finding_line(finding, at_end), file=err, flush=True)

    folder = LiveFold(path, told, config).start()
    report: TraceReport | None = None
    try:
        run(path, folder.tap)
    finally:
        report = folder.close()
        if temporary and not report.findings:
            os.unlink(path)
    return Watched(report, None if temporary and not report.findings else path)


__all__ = ["Watched", "watch"]
