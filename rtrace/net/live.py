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
import re
import sys
import tempfile
import threading
import urllib.parse
from collections.abc import Callable
from typing import IO, Any

import orjson

from ..core.writer import Tap
from ..engine.fold import TraceReport
from ..engine.live import LiveFold, finding_line
from ..rules.base import Config, Finding

#: The head of a line as `core.writer` writes it: its direction and connection, read without parsing the event.
_HEAD = re.compile(rb'\{"t":[^,]*,"dir":"(client|server|meta|local)","conn":(\d+),')


@dataclasses.dataclass
class _Conn:
    path: str = ""
    client: int = 0
    server: int = 0
    rules: collections.Counter[str] = dataclasses.field(default_factory=collections.Counter)


class ConnectionLog:
    """One line per connection, from the lines of the trace as they are written (`tap`) and the findings as they
    are told (`finding`): `conn 1 opened: /v1/realtime?model=gpt-realtime (model gpt-realtime)` and `conn 1
    closed: code 1000, 12 client / 62 server events, findings so far: 1 (RT101)`; then `summary`. Lines go to
    `say`, escaped; the counts come from each line's head (only notes are parsed), so a busy connection costs a
    regular expression per line. `tap` runs on the recorder's thread, `finding` on the fold's."""

    def __init__(self, name: str, say: Callable[[str], None]) -> None:
        self.name = name
        self.say = say
        self.conns: dict[int, _Conn] = {}
        self.by_rule: collections.Counter[str] = collections.Counter()
        self._lock = threading.Lock()
        self._partial = b""

    def tap(self, data: bytes) -> None:
        lines = (self._partial + data).split(b"\n")
        self._partial = lines.pop()
        for line in lines:
            head = _HEAD.match(line)
            if head is None:
                continue  # the header, or a line that is not the writer's
            direction, conn = head.group(1), int(head.group(2))
            state = self.conns.setdefault(conn, _Conn())
            if direction == b"client":
                state.client += 1
            elif direction == b"server":
                state.server += 1
            elif direction == b"meta":
                self._note(conn, state, line)

    def _note(self, conn: int, state: _Conn, line: bytes) -> None:
        try:
            event: Any = orjson.loads(line).get("event")
        except (orjson.JSONDecodeError, AttributeError):
            return
        if not isinstance(event, dict):
            return
        if event.get("type") == "connection.opened":
            state.path = str(event.get("path") or "")
            query = urllib.parse.parse_qs(urllib.parse.urlsplit(state.path).query)
            model = query.get("model", [None])[0]
            what = f"model {model}" if model else "no model in the URL"
            self.say(f"{self.name}: conn {conn} opened: {state.path or '/'} ({what})")
        elif event.get("type") == "connection.closed":
            code = event.get("code", event.get("status"))
            how = f"code {code}" if code is not None else "no close code"
            by = event.get("by")
            if isinstance(by, str):
                how += f" (by the {by})"
            with self._lock:
                found = sum(state.rules.values())
                rules = ", ".join(sorted(state.rules))
            so_far = f"findings so far: {found}" + (f" ({rules})" if rules else "")
            self.say(
                f"{self.name}: conn {conn} closed: {how}, {state.client} client / {state.server} server events, "
                + so_far
            )

    def finding(self, finding: Finding, at_end: bool) -> None:
        with self._lock:
            self.by_rule[finding.rule] += 1
            self.conns.setdefault(finding.conn, _Conn()).rules[finding.rule] += 1

    def summary(self, trace: str | None, temporary: bool) -> str:
        """The last line: connections, events each way, findings by rule, where the trace is."""
        client = sum(c.client for c in self.conns.values())
        server = sum(c.server for c in self.conns.values())
        with self._lock:
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
    once the recording has ended; `log` is given every line and every finding too."""
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

    folder = LiveFold(path, told, config).start()
    tap: Tap = folder.tap
    if log is not None:
        logged = log

        def both(data: bytes) -> None:
            folder.tap(data)
            logged.tap(data)

        tap = both
    report: TraceReport | None = None
    try:
        run(path, tap)
    finally:
        report = folder.close()
        if temporary and not report.findings:
            os.unlink(path)
    return Watched(report, None if temporary and not report.findings else path)


__all__ = ["ConnectionLog", "Watched", "watch"]
