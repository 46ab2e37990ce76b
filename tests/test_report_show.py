"""`rtrace show`: goldens on the shared real traces, hand-checked expectations, timelines, escaping.

The goldens in tests/golden/show/ are rewritten by `python -m tests.regen_show`. EXPECTED below was written by
reading the traces line by line (not from rtrace's output) and pins what the goldens must say.
"""

from __future__ import annotations

import io
import re
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st
from rich.cells import cell_len
from rich.console import Console
from rich.text import Text

from rtrace.core import loader as loader_module
from rtrace.core.loader import TraceReader, load
from rtrace.core.state import TraceState
from rtrace.core.trace import Record
from rtrace.engine.fold import fold_state as fold
from rtrace.report.show import Out, cells, column_widths, render_state, render_timeline, wrap, wrapped

from . import regen_show
from .counting import count_parses

TRACES = regen_show.traces()

# The livekit 1.8.8 run: user d20c, call s1_0001, user 8e45, assistant s1_0002, tool output 2cd9 (line 42/43),
# then the stale push: delete 2cd9 (45) + create user ea66 after s1_0002 (46); deleted at 47, added at 48.
U1, CALL, U2, A1, OUT, U3, A2, A3 = (
    "item_d20c0fe9dbba",
    "item_s1_0001",
    "item_8e4522fb7d75",
    "item_s1_0002",
    "item_2cd9ef851886",
    "item_ea66f32fe7fc",
    "item_s1_0003",
    "item_s1_0004",
)
# livekit 1.8.9: same turns, the output 7cdc stays and user 212d lands after it.
F_U1, F_U2, F_OUT, F_U3 = "item_6e3cb3a49c45", "item_5b6860289c8e", "item_7cdc11f0cb28", "item_212dae7a433d"
# Reconnects: 1.8.4 replays only the user message (16fc), so the output ff74 is rejected; 1.8.5 replays the call.
R4_U1, R4_OUT, R4_A = "item_16fc8a57d58d", "item_ff74c9df91d6", "item_s2_0001"
R5_U1, R5_OUT, R5_A = "item_dbae3c9432ce", "item_eb07f1cfcba9", "item_s2_0001"

#: (trace, at) -> {conn: (status, server conversation, client view, lines of the pending changes)}
EXPECTED: dict[tuple[str, str], dict[str, tuple[str, list[str], list[str], list[int]]]] = {
    ("tool-output-race.livekit-1.8.8", "42"): {"1": ("open", [U1, CALL, U2, A1], [U1, CALL, U2, A1, OUT], [42])},
    ("tool-output-race.livekit-1.8.8", "44"): {"1": ("open", [U1, CALL, U2, A1, OUT], [U1, CALL, U2, A1, OUT], [])},
    ("tool-output-race.livekit-1.8.8", "45"): {"1": ("open", [U1, CALL, U2, A1, OUT], [U1, CALL, U2, A1], [45])},
    ("tool-output-race.livekit-1.8.8", "46"): {
        "1": ("open", [U1, CALL, U2, A1, OUT], [U1, CALL, U2, A1, U3], [45, 46])
    },
    ("tool-output-race.livekit-1.8.8", "47"): {"1": ("open", [U1, CALL, U2, A1], [U1, CALL, U2, A1, U3], [46])},
    ("tool-output-race.livekit-1.8.8", "end"): {
        "1": ("closed at line 76", [U1, CALL, U2, A1, U3, A2, A3], [U1, CALL, U2, A1, U3, A2, A3], [])
    },
    # The client's own recording of the same run: no meta lines, so line numbers are one less and it never closes.
    ("tool-output-race.livekit-1.8.8.client-view", "41"): {
        "1": ("open", [U1, CALL, U2, A1], [U1, CALL, U2, A1, OUT], [41])
    },
    ("tool-output-race.livekit-1.8.8.client-view", "45"): {
        "1": ("open", [U1, CALL, U2, A1, OUT], [U1, CALL, U2, A1, U3], [44, 45])
    },
    ("tool-output-race.livekit-1.8.8.client-view", "end"): {
        "1": ("open", [U1, CALL, U2, A1, U3, A2, A3], [U1, CALL, U2, A1, U3, A2, A3], [])
    },
    ("tool-output-race.livekit-1.8.9", "45"): {
        "1": ("open", [F_U1, CALL, F_U2, A1, F_OUT], [F_U1, CALL, F_U2, A1, F_OUT, F_U3], [45])
    },
    ("tool-output-race.livekit-1.8.9", "end"): {
        "1": (
            "closed at line 74",
            [F_U1, CALL, F_U2, A1, F_OUT, F_U3, A2, A3],
            [F_U1, CALL, F_U2, A1, F_OUT, F_U3, A2, A3],
            [],
        )
    },
    ("reconnect-during-tool.livekit-1.8.4", "20"): {"1": ("open", [R4_U1, CALL], [R4_U1, CALL], [])},
    ("reconnect-during-tool.livekit-1.8.4", "26"): {
        "1": ("closed at line 21", [R4_U1, CALL], [R4_U1, CALL], []),
        "2": ("open", [], [R4_U1], [24, 25, 26]),
    },
    ("reconnect-during-tool.livekit-1.8.4", "31"): {
        "1": ("closed at line 21", [R4_U1, CALL], [R4_U1, CALL], []),
        "2": ("open", [R4_U1], [R4_U1, R4_OUT], [31]),
    },
    ("reconnect-during-tool.livekit-1.8.4", "32"): {
        "1": ("closed at line 21", [R4_U1, CALL], [R4_U1, CALL], []),
        "2": ("open", [R4_U1], [R4_U1], []),
    },
    ("reconnect-during-tool.livekit-1.8.4", "end"): {
        "1": ("closed at line 21", [R4_U1, CALL], [R4_U1, CALL], []),
        "2": ("closed at line 46", [R4_U1, R4_A], [R4_U1, R4_A], []),
    },
    ("reconnect-during-tool.livekit-1.8.5", "27"): {
        "1": ("closed at line 21", [R5_U1, CALL], [R5_U1, CALL], []),
        "2": ("open", [], [R5_U1, CALL], [24, 25, 26, 27]),
    },
    ("reconnect-during-tool.livekit-1.8.5", "34"): {
        "1": ("closed at line 21", [R5_U1, CALL], [R5_U1, CALL], []),
        "2": ("open", [R5_U1, CALL], [R5_U1, CALL, R5_OUT], [34]),
    },
    ("reconnect-during-tool.livekit-1.8.5", "end"): {
        "1": ("closed at line 21", [R5_U1, CALL], [R5_U1, CALL], []),
        "2": ("closed at line 50", [R5_U1, CALL, R5_OUT, R5_A], [R5_U1, CALL, R5_OUT, R5_A], []),
    },
}


def _golden(name: str) -> dict[str, object]:
    data: dict[str, object] = orjson.loads((regen_show.GOLDEN / f"{name}.json").read_bytes())
    return data


@pytest.mark.parametrize("trace", TRACES, ids=[t.name for t in TRACES])
def test_golden_is_up_to_date(trace: Path) -> None:
    """What `rtrace show` says now equals the committed golden (run python -m tests.regen_show and review)."""
    assert regen_show.golden_of(trace) == orjson.loads(regen_show.golden_path(trace).read_bytes())


@pytest.mark.parametrize("trace", TRACES, ids=[t.name for t in TRACES])
def test_real_traces_have_zero_input_problems(trace: Path) -> None:
    records, reader = load(trace)
    assert records and reader.problems == [] and reader.problem_count == 0
    assert _golden(trace.name.removesuffix(".jsonl"))["problems"] == []


@pytest.mark.parametrize(("name", "at"), sorted(EXPECTED), ids=[f"{n}@{a}" for n, a in sorted(EXPECTED)])
def test_golden_says_what_the_events_describe(name: str, at: str) -> None:
    snap = _golden(name)[at]
    assert isinstance(snap, dict)
    conns = snap["connections"]
    assert sorted(conns) == sorted(EXPECTED[name, at])
    for n, (status, server, client, pending) in EXPECTED[name, at].items():
        got = conns[n]
        assert got["status"] == status
        assert got["server"] == server
        assert got["client_view"] == client
        assert [int(p.split(":")[0].removeprefix("line ")) for p in got["pending"]] == pending
        assert got["open_responses"] == []
        # The rendered text lists the server items in conversation order.
        text = "\n".join(snap["text"])
        positions = [text.index(f" {item_id}") for item_id in server]
        assert positions == sorted(positions)


def test_the_race_at_line_46_is_shown_as_a_divergence() -> None:
    snap = _golden("tool-output-race.livekit-1.8.8")["46"]
    assert isinstance(snap, dict)
    conn = snap["connections"]["1"]
    assert conn["only_server"] == [OUT] and conn["only_client"] == [U3]
    text = "\n".join(snap["text"])
    assert "divergence: only on the server: item_2cd9ef851886; only in the client view: item_ea66f32fe7fc" in text
    assert "line 45: delete item_2cd9ef851886" in text
    assert f"line 46: create user message {U3} after {A1}" in text


def render(state: TraceState, at: int, conns: list[int] | None = None) -> str:
    out = io.StringIO()
    render_state(state, at, Console(file=out, width=200, color_system=None, highlight=False), conns)
    return out.getvalue()


def test_render_state_one_connection_only() -> None:
    records, _ = load(regen_show.REAL / "reconnect-during-tool.livekit-1.8.4.jsonl")
    text = render(fold(records), 46, [2])
    assert "connection 2: ended (closed) at line 46, 2 items" in text and "connection 1" not in text


def test_render_timeline_of_one_connection() -> None:
    records, _ = load(regen_show.REAL / "reconnect-during-tool.livekit-1.8.4.jsonl")
    out = io.StringIO()
    render_timeline(records, 2, Console(file=out, width=200, color_system=None), until=32)
    lines = out.getvalue().splitlines()
    numbers = [int(line.split()[0]) for line in lines[1:]]
    assert numbers == list(range(22, 33))
    assert "error invalid_tool_call_id" in lines[-1] and "←" in lines[-1]
    out = io.StringIO()
    assert render_timeline(records, 9, Console(file=out, width=200, color_system=None)) == {1, 2}
    assert out.getvalue() == ""  # not a connection of the trace: the caller says so (`show --conn`: exit 2)


def _two_connections(path: Path, deltas: int) -> None:
    """Connection 1 streams `deltas` text deltas (quiet lines the scanner takes), then connection 2 has four events."""
    ids = {"response_id": "r1", "item_id": "i1", "output_index": 0, "content_index": 0}
    events: list[tuple[int, str, dict[str, Any]]] = [
        (1, "meta", {"type": "connection.opened", "path": "/v1/realtime"}),
        (1, "server", {"type": "session.created", "event_id": "e0", "session": {}}),
        (1, "client", {"type": "response.create", "event_id": "c1"}),
        (1, "server", {"type": "response.created", "event_id": "e1", "response": {"id": "r1"}}),
    ]
    events += [(1, "server", {"type": "response.output_text.delta", **ids, "delta": "w "}) for _ in range(deltas)]
    events += [
        (2, "meta", {"type": "connection.opened", "path": "/v1/realtime"}),
        (2, "server", {"type": "session.created", "event_id": "e2", "session": {}}),
        (2, "server", {"type": "rate_limits.updated", "event_id": "e3", "rate_limits": []}),
        (2, "server", {"type": "rate_limits.updated", "event_id": "e4", "rate_limits": []}),
    ]
    lines = [{"t": k / 1000, "dir": d, "conn": n, "event": ev} for k, (n, d, ev) in enumerate(events)]
    path.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in lines))


@pytest.mark.skipif(loader_module._scanner is None, reason="the C scanner is not built")
def test_show_conn_parses_only_the_lines_of_its_connection(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`show --conn N` (a timeline) reads the other connections' quiet lines on the scanner's fast path: counted,
    of 3,000 deltas on connection 1 none is parsed into objects (the path that left it parsed every line), and the
    timeline is the one the pure path prints."""
    from rtrace.cli import main

    path = tmp_path / "two.jsonl"
    _two_connections(path, 3000)
    parsed = count_parses(monkeypatch)
    assert main(["show", str(path), "--conn", "2"]) == 0
    fast = capsys.readouterr().out
    assert parsed.n < 20, parsed.n  # connection 2's four lines, connection 1's first ones; no delta
    assert fast.count("rate_limits") == 2, fast
    monkeypatch.setattr(loader_module, "_scanner", None)
    assert main(["show", str(path), "--conn", "2"]) == 0
    assert capsys.readouterr().out == fast
    assert parsed.n > 3000


def test_the_timeline_on_the_fast_path_is_the_one_of_the_records_on_every_sample() -> None:
    """`render_timeline` of what `TraceReader.rows` returns (the scanner's runs for the other connections) prints
    what it prints of the records one by one (the pure path), for every connection of every sample and one past."""
    from .conftest import SAMPLES

    def timeline(records: Any, conn: int) -> tuple[str, set[int]]:
        out = io.StringIO()
        seen = render_timeline(records, conn, Console(file=out, width=200, color_system=None))
        return out.getvalue(), seen

    for path in sorted(SAMPLES.rglob("*.jsonl")):
        records, _ = load(path)
        for conn in sorted({r.conn for r in records} | {99}):
            with TraceReader.open(path) as reader:
                assert timeline(reader.rows(), conn) == timeline(records, conn), (path, conn)


def _rec(line: int, direction: str, event: dict[str, object]) -> Record:
    etype = str(event["type"])
    return Record(line - 1, line, line / 10, direction, 1, event, etype, etype)  # type: ignore[arg-type]


def test_untrusted_text_is_escaped_in_show() -> None:
    evil = "\x1b[31mred\x1b[0m [bold]loud[/bold] \x07"
    records = [
        _rec(1, "server", {"type": "conversation.item.added", "previous_item_id": None,
                           "item": {"id": "a\x1b[2J", "type": "message", "role": "user",
                                    "content": [{"type": "input_text", "text": evil}]}}),
        _rec(2, "client", {"type": "conversation.item.delete", "item_id": "[red]x[/red]\x1b[1m"}),
    ]  # fmt: skip
    text = render(fold(records), 2)
    assert "\x1b" not in text and "\x07" not in text
    assert "\\x1b[31mred\\x1b[0m [bold]loud[/bold] \\x07" in text
    assert "a\\x1b[2J" in text and "delete [red]x[/red]\\x1b[1m" in text
    out = io.StringIO()
    render_timeline(records, 1, Console(file=out, width=200, color_system=None))
    assert "\x1b" not in out.getvalue() and "[red]x[/red]\\x1b[1m" in out.getvalue()


@given(
    st.lists(
        st.tuples(st.text(alphabet=st.sampled_from("ab  語x"), max_size=30), st.sampled_from(["", "dim", "magenta"])),
        max_size=4,
    ),
    st.integers(2, 30),  # a wide character takes 2 cells
)
def test_wrap_fits_every_line_and_keeps_every_word(cell: list[tuple[str, str]], width: int) -> None:
    lines = wrap(cell, width, "bold red")
    assert all(sum(cell_len(run) for run, _ in line) <= width for line in lines)
    assert wrapped(cell, width, "bold red") == (lines, [sum(cell_len(run) for run, _ in line) for line in lines])
    assert all(style.endswith("bold red") for line in lines for _, style in line)
    text = "".join(run for run, _ in cell)
    assert "".join(run for line in lines for run, _ in line).replace(" ", "") == text.replace(" ", "")
    assert all(not line or (line[0][0][0] != " " and line[-1][0][-1] != " ") for line in lines)


def word_by_word(cell: list[tuple[str, str]], width: int, over: str = "") -> tuple[list[Any], list[int]]:
    """The reference `wrapped` is held to, as `show` laid out before it took a stretch of words at a time: each word
    with the spaces last seen before it (a run's or an earlier run's), put on the line while it fits, each word and
    each space a run of its own; a word wider than a line cut (`chop`)."""
    from rtrace.report.show import chop

    words: list[tuple[tuple[str, str] | None, str, str]] = []
    before: tuple[str, str] | None = None
    for run, style in cell:
        style = f"{style} {over}".strip()
        for token in re.findall(r" +|[^ ]+", run):
            if token.startswith(" "):
                before = (token, style)
            else:
                words.append((before, token, style))
                before = None
    out: list[Any] = [[]]
    taken: list[int] = [0]
    for spaces, word, style in words:
        wide = cell_len(word)
        if taken[-1] and spaces is not None and taken[-1] + len(spaces[0]) + wide <= width:
            out[-1].append(spaces)
            taken[-1] += len(spaces[0])
        elif taken[-1] and taken[-1] + wide > width - (len(spaces[0]) if spaces else 0):
            out.append([])
            taken.append(0)
        while wide > width - taken[-1]:
            head = chop(word, width - taken[-1])
            out[-1].append((head, style))
            taken[-1] += cell_len(head)
            out.append([])
            taken.append(0)
            word = word[len(head) :]
            wide = cell_len(word)
        if word:
            out[-1].append((word, style))
            taken[-1] += wide
    if not out[-1] and len(out) > 1:
        out.pop()
        taken.pop()
    return out, taken


@given(
    st.lists(
        st.tuples(
            st.lists(st.sampled_from(["a", "b", " ", "  ", "語", "×", "xyzzy", "item_p01"]), max_size=12).map("".join),
            st.sampled_from(["", "dim", "magenta"]),
        ),
        max_size=5,
    ),
    st.integers(1, 40),
    st.sampled_from(["", "bold red"]),
)
def test_a_stretch_of_words_at_a_time_breaks_where_a_word_at_a_time_broke(
    cell: list[tuple[str, str]], width: int, over: str
) -> None:
    """`wrapped` takes as many words of a run as fit at once: drawn (in colour), the very runs a word at a time made,
    each styled word and space its own (rich draws each run apart); in plain text, the same characters on the same
    lines, the same sizes."""
    lines, sizes = word_by_word(cell, width, over)
    assert wrapped(cell, width, over) == (lines, sizes)
    plain, plain_sizes = wrapped(cell, width, over, drawn=False)
    assert ["".join(run for run, _ in line) for line in plain] == ["".join(run for run, _ in line) for line in lines]
    assert plain_sizes == sizes


@given(st.text(alphabet=st.sampled_from("ab  語x\x1b\x07\u200b\u0301é~\x7f\t")))
def test_cells_counts_what_rich_counts(text: str) -> None:
    """`cells` answers printable ASCII by `len` and asks rich the rest: the widths `show` lays out by are rich's."""
    assert cells(text) == cell_len(text)


def test_a_row_with_the_same_item_on_both_sides_shows_it_in_both_columns() -> None:
    """The right column reuses the left's cell and lines when they show the same item the same way (most rows):
    both columns still show it, as two lay-outs would."""
    records, _ = load(regen_show.REAL / "tool-output-race.livekit-1.8.8.jsonl")
    out = io.StringIO()
    render_state(fold(records[:40]), 40, Console(file=out, width=120, color_system=None))
    rows = [line for line in out.getvalue().splitlines() if U1 in line]
    assert rows and all(line.count(U1) == 2 for line in rows)


def test_a_console_without_colours_gets_the_text_a_colour_console_shows() -> None:
    """Laid out once; printed as plain text to a pipe or file (no rich object per cell: the fix that made `show
    --at` cheaper than the fold it shows), and through rich with colours: the same characters."""
    records, _ = load(regen_show.REAL / "tool-output-race.livekit-1.8.8.jsonl")
    state = fold(records)
    made = [0]
    real_init = Text.__init__

    def counting(self: Text, *a: Any, **kw: Any) -> None:
        made[0] += 1
        real_init(self, *a, **kw)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(Text, "__init__", counting)
        plain = render(state, 46)
    assert made[0] == 0
    out = io.StringIO()
    render_state(state, 46, Console(file=out, width=200, color_system="truecolor", highlight=False))
    coloured = out.getvalue()
    assert "\x1b[" in coloured and re.sub(r"\x1b\[[0-9;]*m", "", coloured) == plain


@pytest.fixture(scope="module")
def pipelined(tmp_path_factory: pytest.TempPathFactory) -> list[Record]:
    """A burst of 400 creates acknowledged after (bench's pipelined-creates-ids), loaded."""
    from bench.scale import render as render_shape

    path = tmp_path_factory.mktemp("show") / "pipelined.jsonl"
    path.write_bytes(render_shape("pipelined-creates-ids", 5, 400))
    records, _ = load(path)
    return records


@pytest.mark.parametrize("width", [50, 120, 240])
@pytest.mark.parametrize("colours", [None, "truecolor"])
def test_the_view_written_as_laid_out_is_the_view_written_whole(
    pipelined: list[Record], width: int, colours: str | None
) -> None:
    """`show` writes its lines as it lays them out, a batch at a time (`Out.BATCH` runs, then the line's end): the
    same bytes as one write of the whole, with and without colours, at widths that wrap every item, some, or none
    (the columns read from every row, or from the first ones only), mid-burst (a client view longer than the
    server's) and at the end. It never holds more than a batch and one line."""
    records = pipelined
    ats = (records[len(records) // 3].line, records[-1].line)
    for at in ats:
        state = fold([r for r in records if r.line <= at])

        def shown_with(batch: int, state: TraceState = state, at: int = at) -> tuple[str, list[int]]:
            held: list[int] = []
            real_write = Out.write

            def write(self: Out) -> None:
                held.append(len(self.runs))
                real_write(self)

            out = io.StringIO()
            with pytest.MonkeyPatch.context() as mp:
                mp.setattr(Out, "BATCH", batch)
                mp.setattr(Out, "write", write)
                console = Console(file=out, width=width, color_system=colours, highlight=False)  # type: ignore[arg-type]
                render_state(state, at, console)
            return out.getvalue(), held

        whole, held = shown_with(1 << 40)
        assert len(held) == 1 and "item_p00000399" in whole
        streamed, held = shown_with(20)
        assert streamed == whole
        assert len(held) > 20 and max(held) <= 20 + width + 1  # a batch, and the line it ends in (a run a cell)


@given(
    st.lists(st.tuples(st.integers(0, 90), st.integers(0, 90), st.booleans()), max_size=12),
    st.integers(24, 200),
)
def test_the_columns_read_from_the_first_rows_are_the_columns_of_every_row(
    sizes: list[tuple[int, int, bool]], room: int
) -> None:
    """`column_widths` stops reading rows once no later row can change the widths: the widths are those of every
    row read."""
    rows = []
    for left, right, same in sizes:
        cell: list[tuple[str, str]] = [("x" * left, "")]
        rows.append((cell, "", cell if same else [("y" * right, "")], ""))
    titles = ("server conversation", "client view (confirmed + pending)")
    widest = [max([cells(titles[0])] + [left for left, _, _ in sizes]), cells(titles[1])]
    widest[1] = max([widest[1]] + [left if same else right for left, right, same in sizes])
    half = room // 2
    if sum(widest) <= room:
        want = widest
    elif min(widest) < half:
        narrow = 0 if widest[0] < widest[1] else 1
        want = [0, 0]
        want[narrow], want[1 - narrow] = widest[narrow], room - widest[narrow]
    else:
        want = [half, room - half]
    assert column_widths(iter(rows), titles, room) == want
