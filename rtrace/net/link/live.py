"""Live findings beside a recorder (`serve`, `record`): the recorder's writer hands each line it writes to a
`engine.live.LiveFold`, which prints each finding to `err` the moment it is certain (`--live`), and to a
`ConnectionLog`, which tells one line per connection opened and closed and, at the end, a summary. Without a
trace file of the user's, the recording goes to a temporary one, kept only when it has findings (so a report can
cite its lines).
"""

from __future__ import annotations

import collections
import dataclasses
import os
import sys
import tempfile
import urllib.parse
from collections.abc import Callable
from typing import IO

from ...core.loader import Row
from ...core.writer import Tap
from ...engine.fold import TraceReport
from ...engine.live import LiveFold, finding_line
from ...rules.base import Config, Finding


@dataclasses.dataclass
class _Conn:
    path: str = ""
    client: int = 0
    server: int = 0
    rules: collections.Counter[str] = dataclasses.field(default_factory=collections.Counter)


class ConnectionLog:
    """One line per connection, from the rows of the trace as the live fold folds them (`row`, after the findings
    each row made: `finding`): `conn 1 opened: /v1/realtime?model=gpt-realtime (model gpt-realtime)` and `conn 1
    closed: code 1000 (by the client), 12 client / 62 server events, findings so far: 1 (RT101)`; then `summary`.
    Lines go to `say` (the CLI's, escaped). Both run on the fold's thread; `summary` once it has ended."""

    def __init__(self, name: str, say: Callable[[str], None]) -> None:
        self.name = name
        self.say = say
        self.conns: dict[int, _Conn] = {}
        self.by_rule: collections.Counter[str] = collections.Counter()

    def row(self, row: Row) -> None:
        direction, conn, event, etype = row[3], row[4], row[5], row[6]
        state = self.conns.setdefault(conn, _Conn())
        if direction == "client":
            state.client += 1
        elif direction == "server":
            state.server += 1
        elif direction == "meta" and etype == "connection.opened":
            state.path = str(event.get("path") or "")
            query = urllib.parse.parse_qs(urllib.parse.urlsplit(state.path).query)
            model = query.get("model", [None])[0]
            what = f"model {model}" if model else "no model in the URL"
            self.say(f"{self.name}: conn {conn} opened: {state.path or '/'} ({what})")
        elif direction == "meta" and etype == "connection.closed":
            code = event.get("code", event.get("status"))
            how = f"code {code}" if code is not None else "no close code"
            by = event.get("by")
            if isinstance(by, str):
                how += f" (by the {by})"
            found = sum(state.rules.values())
            so_far = f"findings so far: {found}" + (f" ({', '.join(sorted(state.rules))})" if found else "")
            self.say(
                f"{self.name}: conn {conn} closed: {how}, {state.client} client / {state.server} server events, "
                + so_far
            )

    def finding(self, finding: Finding, at_end: bool) -> None:
        self.by_rule[finding.rule] += 1
        self.conns.setdefault(finding.conn, _Conn()).rules[finding.rule] += 1

    def summary(self, trace: str | None, temporary: bool) -> str:
        """The last line: connections, events each way, findings by rule, where the trace is."""
        client = sum(c.client for c in self.conns.values())
        server = sum(c.server for c in self.conns.values())
        rules = ", ".join(f"{rule} x{n}" for rule, n in sorted(self.by_rule.items())) or "none"
        if trace is None:
            where = "no trace kept (no finding; --record FILE keeps one)"
        elif temporary:
            where = f"trace kept at {trace} (it has findings)"
        else:
            where = f"trace in {trace}"
        n = len(self.conns)
        return (
            f"{self.name}: stopped: {n} connection{'s' if n != 1 else ''}, {client} client / {server} server "
            f"events, findings: {rules}; {where}"
        )


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
    log: ConnectionLog | None = None,
) -> Watched:
    """`run(path, tap)` records to `path` (the user's `record`, or a temporary file) with `tap` as the writer's
    hook; with `live`, each finding is printed to `err` as it becomes certain, those only the end made certain
    once the recording has ended; `log` is told every row folded and every finding too."""
    temporary = record is None
    if record is None:
        fd, path = tempfile.mkstemp(prefix="rtrace-", suffix=".jsonl")
        os.close(fd)
    else:
        path = os.fspath(record)

    def told(finding: Finding, at_end: bool) -> None:
        if live:
            print(finding_line(finding, at_end), file=err, flush=True)
        if log is not None:
            log.finding(finding, at_end)

    folder = LiveFold(path, told, config, log.row if log is not None else None).start()
    report: TraceReport | None = None
    try:
        run(path, folder.tap)
    finally:
        report = folder.close()
        if temporary and not report.findings:
            os.unlink(path)
    return Watched(report, None if temporary and not report.findings else path)


__all__ = ["ConnectionLog", "Watched", "watch"]
