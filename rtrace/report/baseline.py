"""Known findings: a baseline file records the SARIF fingerprints of a report's findings, and a later run accepts
the findings whose fingerprint it lists (`--baseline FILE`, written with `--write-baseline`).

A fingerprint says what a finding is about (rule, trace file name, connection, ids, occurrence), never where it
sits, so a baseline survives traces that grow or shift (see `sarif.fingerprint`). Accepted findings leave the
report; each trace counts how many it lost, so renderers can say so.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import orjson

from ..core.inputs import TooDeep, UnreadableInput, check_nesting, read_side_input
from ..engine.fold import Report
from .sarif import trace_fingerprints

SCHEMA = "rtrace.baseline/1"


class BaselineError(ValueError):
    """A baseline file that cannot be read or is not a baseline (the message names the file and why)."""


def render(report: Report) -> bytes:
    """The baseline of `report`: every finding's fingerprint, with its rule, trace and message for people."""
    entries = []
    for trace in report.traces:
        for finding, print_ in trace_fingerprints(trace):
            entries.append(
                {
                    "fingerprint": print_,
                    "rule": finding.rule,
                    "trace": os.path.basename(trace.path),
                    "message": finding.message,
                }
            )
    entries.sort(key=lambda e: (e["trace"], e["rule"], e["fingerprint"]))
    return orjson.dumps({"schema": SCHEMA, "findings": entries}, option=orjson.OPT_INDENT_2) + b"\n"


def load(path: Path) -> frozenset[str]:
    """The fingerprints a baseline file accepts."""
    try:
        text = read_side_input(path, "the baseline")
        check_nesting(text.decode("utf-8", "replace"), str(path))
        data = orjson.loads(text)
    except (UnreadableInput, TooDeep) as e:
        raise BaselineError(str(e)) from None
    except OSError as e:
        raise BaselineError(f"{path}: {e.strerror or e}") from None
    except orjson.JSONDecodeError as e:
        raise BaselineError(f"{path}: not JSON ({e.args[0] if e.args else e})") from None
    if not isinstance(data, dict) or data.get("schema") != SCHEMA or not isinstance(data.get("findings"), list):
        raise BaselineError(f"{path}: not an rtrace baseline (schema {SCHEMA!r}); write one with --write-baseline")
    prints = set()
    for k, entry in enumerate(data["findings"]):
        if not isinstance(entry, dict) or not isinstance(entry.get("fingerprint"), str):
            raise BaselineError(f"{path}: findings[{k}] has no fingerprint")
        prints.add(entry["fingerprint"])
    return frozenset(prints)


def apply(report: Report, known: frozenset[str]) -> Report:
    """`report` without the findings `known` lists; each trace's `accepted` counts those it lost."""
    traces = []
    for trace in report.traces:
        kept = [f for f, print_ in trace_fingerprints(trace) if print_ not in known]
        accepted = len(trace.findings) - len(kept)
        traces.append(dataclasses.replace(trace, findings=kept, accepted=trace.accepted + accepted))
    return dataclasses.replace(report, traces=traces)
