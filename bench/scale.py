"""Workloads of the scaling suite (issue 15): one generator per session shape, each at any size.

Every trace is native rtrace JSONL, deterministic by seed (same seed and size: same bytes), protocol-valid and
*clean*: `rtrace analyze` reports no finding and no input problem at any size (`tests/test_bench_scale.py` checks
it on tiny sizes, `bench.run_scale` on every size it measures). A shape's size is a count of its unit (items,
connections, pairs, lines, seconds); the suite runs each at 1x, 4x and 16x its base size.

The shapes (what grows with the size; where the issue saw quadratic cost):

* `deletes-with-calls`: one long text conversation (items), tool calls every other turn; the client deletes the
  oldest function_call + output pair every other tool turn, so the conversation keeps growing.
* `many-reconnects`: a new connection (with a replay of the kept conversation) for every turn (connections).
* `reconnects-unacked-create`: the same, but each connection closes with a user message create unacknowledged;
  the next connection re-sends it in its replay and answers it (RT106 must track it and stay silent).
* `pipelined-creates-ids`: one burst of creates with client-chosen ids, all acknowledged after (items).
* `pipelined-creates-no-ids`: the same without item ids, the usual SDK shape (items).
* `pipelined-call-output-pairs`: one burst of function_call + function_call_output creates, acks after (pairs).
* `html-report`: a conversation of N items that is never trimmed, measured with `rtrace report -o x.html`.
* `show-at`: `rtrace show --at N` on one long text session (lines), N cut where the prefix is itself clean.
* `audio-call`, `event-heavy`: the two workloads of `bench.generate` (seconds of the call / session).

Files are cached under `bench/data/scale/`: a file is rewritten only when its parameters or the source of this
module or `bench.generate` change.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import random
import sys
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import orjson

from bench.generate import Session, TraceWriter, _say, text_session, voice_call

DATA = Path(__file__).resolve().parent / "data" / "scale"
DEFAULT_SEED = 15
SIZES = (1, 4, 16)

Generator = Callable[[IO[bytes], int, int], int]


# -- helpers -------------------------------------------------------------------------------------------------


def _short_text(s: Session, rid: str, item_id: str, words: int = 8) -> dict[str, Any]:
    """A short streamed text answer: one delta per word."""
    w = s.w
    common = {"response_id": rid, "item_id": item_id, "output_index": 0, "content_index": 0}
    w.server("response.content_part.added", **common, part={"type": "text", "text": ""})
    said = _say(w.rng, words)
    for word in said:
        w.advance(0.015)
        w.server("response.output_text.delta", **common, delta=word + " ")
    text = " ".join(said)
    w.server("response.output_text.done", **common, text=text)
    w.server("response.content_part.done", **common, part={"type": "text", "text": text})
    return {"type": "output_text", "text": text}


def _user_turn(s: Session, tool: bool, words: int = 8) -> None:
    """A user message (created and acknowledged), a response.create and the answer; with `tool`, the answer is a
    function call first, then the client's output, then the text."""
    w = s.w
    s.turns += 1
    w.advance(1.0 + w.rng.random())
    text = " ".join(_say(w.rng, w.rng.randint(4, 12)))
    s.create({"id": f"item_u{s.turns:08d}", "type": "message", "role": "user", "content": _input(text)})
    w.advance(0.002)
    request = s.request_response()
    w.advance(0.3)
    if tool:
        s.respond(request, True, None)
        request = s.tool_output()
    s.respond(request, False, lambda rid, item_id: _short_text(s, rid, item_id, words))


def _input(text: str) -> list[dict[str, Any]]:
    return [{"type": "input_text", "text": text}]


def _open(w: TraceWriter, mode: str = "text") -> Session:
    s = Session(w, mode)
    s.connect(replay=False)
    return s


# -- shapes --------------------------------------------------------------------------------------------------


def deletes_with_calls(fp: IO[bytes], seed: int, items: int) -> int:
    """One connection, a conversation growing to about `items` items (5/6 of those created stay): turns of a user
    message and a text answer, every other one with a tool call; every other tool turn the client deletes the
    oldest function_call and its output (one burst: the call, then the output; acks after)."""
    w = TraceWriter(fp, random.Random(seed))
    s = _open(w)
    pairs: deque[tuple[dict[str, Any], dict[str, Any]]] = deque()
    created = 0
    tool_turns = 0
    while created < items:
        tool = s.turns % 2 == 1
        _user_turn(s, tool, words=4)
        created += 4 if tool else 2
        if not tool:
            continue
        tool_turns += 1
        pairs.append((s.items[-3], s.items[-2]))  # the function_call and its output, before the answer
        if tool_turns % 2 == 0:
            call, out = pairs.popleft()
            w.advance(0.5)
            for item in (call, out):
                w.client("conversation.item.delete", "chat_ctx_delete", item_id=item["id"])
                w.advance(0.0005)
            w.advance(0.04)
            for item in (call, out):
                w.server("conversation.item.deleted", item_id=item["id"])
                s.items.remove(item)
                w.advance(0.0003)
    s.close()
    return w.lines


def _reconnect_turns(fp: IO[bytes], seed: int, connections: int, unacked: bool) -> int:
    w = TraceWriter(fp, random.Random(seed))
    s = Session(w, "text")
    lost: dict[str, Any] | None = None
    for k in range(connections):
        s.connect(replay=k > 0)  # replays every item the client holds, the unacknowledged create included
        if lost is not None:
            w.advance(0.05)
            request = s.request_response()
            w.advance(0.3)
            s.respond(request, False, lambda rid, item_id: _short_text(s, rid, item_id))
            lost = None
        _user_turn(s, tool=k % 3 == 2)
        s.trim(6)
        if unacked:
            # The user speaks again just as the socket drops: the create is sent, never acknowledged.
            s.turns += 1
            w.advance(1.0 + w.rng.random())
            text = " ".join(_say(w.rng, w.rng.randint(4, 12)))
            lost = {"id": f"item_u{s.turns:08d}", "type": "message", "role": "user", "content": _input(text)}
            s.create(lost, wait=False)
            w.advance(0.01)
            w.emit("meta", {"type": "connection.closed", "code": 1006, "reason": "connection lost"})
            w.advance(0.5)
        else:
            s.close()
            w.advance(0.3)
    if lost is not None:
        # The last connection lost its create too: one more connection re-sends it and answers it.
        s.connect(replay=True)
        request = s.request_response()
        w.advance(0.3)
        s.respond(request, False, lambda rid, item_id: _short_text(s, rid, item_id))
        s.close()
    return w.lines


def many_reconnects(fp: IO[bytes], seed: int, connections: int) -> int:
    """`connections` connections in a row, each replaying the conversation (at most 6 items, function calls
    with their outputs), then one turn (a tool call every third), old items deleted, a clean close."""
    return _reconnect_turns(fp, seed, connections, unacked=False)


def reconnects_unacked_create(fp: IO[bytes], seed: int, connections: int) -> int:
    """As `many_reconnects`, but every connection is lost right after a user message create it never saw
    acknowledged; the next connection re-creates it in its replay (same id) and asks for its answer."""
    return _reconnect_turns(fp, seed, connections, unacked=True)


def _pipeline_spacing(count: int) -> float:
    """Creates of one pipeline are sent this far apart, so the first one's ack comes well within 5 s."""
    return min(0.0005, 2.0 / max(count, 1))


def _acknowledge(s: Session, batch: list[dict[str, Any]], gap: float) -> None:
    """The server's answers to a pipeline, after it: added + done for each item, in order."""
    s.w.advance(0.05)
    prev: str | None = None
    for item in batch:
        s._added(item, prev)
        prev = item["id"]
        s.w.advance(gap)


def pipelined_creates_ids(fp: IO[bytes], seed: int, items: int) -> int:
    """One connection; the client sends `items` user message creates with its own ids back to back (each after the
    previous), and the server acknowledges them all after (added + done, in order). Then one turn."""
    w = TraceWriter(fp, random.Random(seed))
    s = _open(w)
    gap = _pipeline_spacing(items)
    batch: list[dict[str, Any]] = []
    for k in range(items):
        text = " ".join(_say(w.rng, 6))
        item = {"id": f"item_p{k:08d}", "type": "message", "role": "user", "content": _input(text)}
        s.create(item, wait=False)
        batch.append(item)
        w.advance(gap)
    _acknowledge(s, batch, gap / 2)
    _user_turn(s, tool=False)
    s.close()
    return w.lines


def pipelined_creates_no_ids(fp: IO[bytes], seed: int, items: int) -> int:
    """As `pipelined_creates_ids`, but the creates carry no item id and no previous_item_id (what the SDKs send):
    the server names each item and acknowledges them in order."""
    w = TraceWriter(fp, random.Random(seed))
    s = _open(w)
    gap = _pipeline_spacing(items)
    texts = []
    for _ in range(items):
        text = " ".join(_say(w.rng, 6))
        texts.append(text)
        w.client("conversation.item.create", item={"type": "message", "role": "user", "content": _input(text)})
        w.advance(gap)
    user = {"type": "message", "role": "user"}
    named = [{"id": f"item_srv{k:08d}", **user, "content": _input(text)} for k, text in enumerate(texts)]
    s.items.extend(named)
    _acknowledge(s, named, gap / 2)
    _user_turn(s, tool=False)
    s.close()
    return w.lines


def pipelined_call_output_pairs(fp: IO[bytes], seed: int, pairs: int) -> int:
    """One connection; the client sends `pairs` function_call + function_call_output creates back to back (a
    replay of tool history), the server acknowledges all of them after, in order. Then one turn."""
    w = TraceWriter(fp, random.Random(seed))
    s = _open(w)
    gap = _pipeline_spacing(2 * pairs)
    batch: list[dict[str, Any]] = []
    for k in range(pairs):
        call_id = f"call_p{k:08d}"
        args = json.dumps({"city": w.rng.choice(("Paris", "Lyon", "Oslo", "Rome"))})
        call = {"id": f"item_c{k:08d}", "type": "function_call", "name": "get_weather", "call_id": call_id}
        call["arguments"] = args
        out = {"id": f"item_o{k:08d}", "type": "function_call_output", "call_id": call_id}
        out["output"] = json.dumps({"ok": True, "summary": " ".join(_say(w.rng, 5))})
        for item in (call, out):
            s.create(item, wait=False)
            batch.append(item)
            w.advance(gap)
    _acknowledge(s, batch, gap / 2)
    _user_turn(s, tool=False)
    s.close()
    return w.lines


def html_report(fp: IO[bytes], seed: int, items: int) -> int:
    """One connection, a text conversation of `items` items never trimmed: turns of a user message and a streamed
    answer of 8 deltas, a tool call every fifth turn (about 10 lines per item)."""
    w = TraceWriter(fp, random.Random(seed))
    s = _open(w)
    while len(s.items) < items:
        _user_turn(s, tool=s.turns % 5 == 4)
    s.close()
    return w.lines


def show_at_trace(fp: IO[bytes], seed: int, lines: int) -> int:
    """The long trace `show --at` reads: the event-heavy text session (about 14 lines a second) of `lines` lines."""
    return text_session(fp, seed, lines / 13.8)


def audio_call(fp: IO[bytes], seed: int, seconds: int) -> int:
    return voice_call(fp, seed, float(seconds))


def event_heavy(fp: IO[bytes], seed: int, seconds: int) -> int:
    return text_session(fp, seed, float(seconds))


@dataclasses.dataclass(frozen=True)
class Shape:
    name: str
    generate: Generator
    #: The 1x size, in `unit`s.
    base: int
    unit: str
    #: What is measured: `analyze`, `report` (HTML, analyze as reference) or `show-at` (analyze of the prefix as
    #: reference).
    kind: str = "analyze"


SHAPES: dict[str, Shape] = {
    s.name: s
    for s in (
        Shape("deletes-with-calls", deletes_with_calls, 5000, "items"),
        Shape("many-reconnects", many_reconnects, 600, "connections"),
        Shape("reconnects-unacked-create", reconnects_unacked_create, 150, "connections"),
        Shape("pipelined-creates-ids", pipelined_creates_ids, 12500, "items"),
        Shape("pipelined-creates-no-ids", pipelined_creates_no_ids, 2000, "items"),
        Shape("pipelined-call-output-pairs", pipelined_call_output_pairs, 1000, "pairs"),
        Shape("html-report", html_report, 300, "items", "report"),
        Shape("show-at", show_at_trace, 25000, "lines", "show-at"),
        Shape("audio-call", audio_call, 225, "seconds"),
        Shape("event-heavy", event_heavy, 2250, "seconds"),
    )
}
#: The `show-at` trace is this many times the 16x size long, so every `--at` stops well before its end.
SHOW_AT_LENGTH = 16 * 5 // 4


# -- files ---------------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Case:
    """One shape at one size, on disk."""

    shape: str
    size: int
    #: The size in the shape's unit.
    n: int
    #: The trace the rtrace command reads.
    path: Path
    #: The trace the floor and the reference analysis read (the prefix, for `show-at`).
    floor_path: Path
    #: Lines of `floor_path`.
    lines: int
    #: For `show-at`: the line given to `--at`.
    at: int | None = None


def _source_digest() -> str:
    here = Path(__file__).resolve()
    blob = here.read_bytes() + (here.parent / "generate.py").read_bytes()
    return hashlib.sha256(blob).hexdigest()[:16]


def write(gen: Generator, path: Path, seed: int, n: int) -> int:
    """Write one trace atomically; returns its line count."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    with tmp.open("wb", buffering=1 << 20) as fp:
        lines = gen(fp, seed, n)
    tmp.replace(path)
    return lines


def render(name: str, seed: int, n: int) -> bytes:
    """The bytes of one shape's trace of size `n` (for tests: the same seed gives the same bytes)."""
    import io

    buf = io.BytesIO()
    SHAPES[name].generate(buf, seed, n)
    return buf.getvalue()


def clean_cut(path: Path, target: int) -> int:
    """The last line <= `target` after which the prefix is a clean trace of its own: the end of a turn (a
    `rate_limits.updated`) right before a user message create (the turn is answered, nothing is pending; a
    reconnect's replay never starts there)."""
    best = 0
    previous = b""
    with path.open("rb") as fp:
        for line, raw in enumerate(fp, 1):
            if line > target + 1:
                break
            turn_ends = b'"rate_limits.updated"' in previous
            if turn_ends and b'"conversation.item.create"' in raw and b'"role":"user"' in raw:
                best = line - 1
            previous = raw
    return best


def ensure(name: str, size: int, seed: int = DEFAULT_SEED, data: Path = DATA) -> Case:
    """The case `name` at `size` (a multiple of the base), generated unless cached and current."""
    shape = SHAPES[name]
    n = shape.base * size
    digest = _source_digest()
    manifest_path = data / "MANIFEST.json"
    manifest: dict[str, Any] = {}
    if manifest_path.exists():
        manifest = orjson.loads(manifest_path.read_bytes())

    def cached(fname: str, params: dict[str, Any], make: Callable[[Path], int]) -> int:
        path = data / fname
        key = {"digest": digest, **params}
        entry = manifest.get(fname)
        if entry is not None and entry.get("key") == key and path.exists():
            return int(entry["lines"])
        print(f"generating {path} ...", file=sys.stderr)
        lines = make(path)
        manifest[fname] = {"key": key, "lines": lines, "bytes": path.stat().st_size}
        data.mkdir(parents=True, exist_ok=True)
        manifest_path.write_bytes(orjson.dumps(manifest, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS))
        return lines

    if shape.kind != "show-at":
        fname = f"{name}-{size}x.jsonl"
        lines = cached(fname, {"seed": seed, "n": n}, lambda p: write(shape.generate, p, seed, n))
        return Case(name, size, n, data / fname, data / fname, lines)
    full = f"{name}-trace.jsonl"
    total = shape.base * SHOW_AT_LENGTH
    cached(full, {"seed": seed, "n": total}, lambda p: write(shape.generate, p, seed, total))
    prefix = f"{name}-{size}x.jsonl"

    def cut(path: Path) -> int:
        at = clean_cut(data / full, n)
        with (data / full).open("rb") as src, path.open("wb") as dst:
            for line, raw in enumerate(src, 1):
                if line > at:
                    break
                dst.write(raw)
        return at

    at = cached(prefix, {"seed": seed, "n": n, "of": total}, cut)
    return Case(name, size, n, data / full, data / prefix, at, at)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", default=",".join(SHAPES), help="comma-separated (default: all)")
    parser.add_argument("--sizes", default="1,4,16")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--json", action="store_true", help="print each case as one JSON line")
    args = parser.parse_args(argv)
    for name in args.shapes.split(","):
        for size in (int(x) for x in args.sizes.split(",")):
            case = ensure(name, size, args.seed, args.data)
            if args.json:
                print(orjson.dumps(dataclasses.asdict(case), default=str).decode())
            else:
                print(f"{case.shape} {case.size}x: {case.n:,} {SHAPES[name].unit}, {case.lines:,} lines, {case.path}")
    return 0


def case_from_json(text: str) -> Case:
    fields = orjson.loads(text)
    return Case(**{**fields, "path": Path(fields["path"]), "floor_path": Path(fields["floor_path"])})


if __name__ == "__main__":
    sys.exit(main())
