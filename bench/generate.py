"""Deterministic, protocol-plausible benchmark workloads: an hour-long voice call, a twenty-hour text session, a fleet.

Every trace is native rtrace JSONL (`{"t", "dir", "conn", "event"}`) shaped like a server-VAD realtime session
(GA event names). The same seed gives the same bytes. Generated files are cached under `bench/data/` with a
manifest; they are regenerated only when the parameters or this script change (or with `--force`).
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import random
import sys
import time
from pathlib import Path
from typing import IO, Any

import orjson

DEFAULT_OUT = Path(__file__).resolve().parent / "data"
DEFAULT_SEED = 7

#: Input audio: pcm16 mono at 24 kHz, sent by the client in 20 ms frames (960 bytes, 1280 base64 chars).
FRAME_MS = 20
FRAME_BYTES = 24000 * 2 * FRAME_MS // 1000
#: Output audio arrives in deltas of this many milliseconds.
DELTA_MS = 50
DELTA_BYTES = 24000 * 2 * DELTA_MS // 1000

WORDS = (
    "the order ships tomorrow morning and you will get a tracking number by email once it leaves our "
    "warehouse sure I can help with that let me check the weather in Paris it is sunny and mild today "
    "would you like anything else your appointment is confirmed for Tuesday at three thank you for calling"
).split()
TOOLS = ("get_weather", "lookup_order", "book_appointment")
CITIES = ("Paris", "Lyon", "Berlin", "Madrid", "Rome", "Oslo", "Lisbon", "Vienna")


class TraceWriter:
    """Writes one trace: the clock, the connection ordinal and server event ids."""

    def __init__(self, fp: IO[bytes], rng: random.Random) -> None:
        self.fp = fp
        self.rng = rng
        self.t = 0.0
        self.conn = 0
        self.lines = 0
        self._server_events = 0
        self._ids = 0
        self._dumps = orjson.dumps

    def emit(self, direction: str, event: dict[str, Any]) -> None:
        self.fp.write(self._dumps({"t": round(self.t, 6), "dir": direction, "conn": self.conn, "event": event}))
        self.fp.write(b"\n")
        self.lines += 1

    def server(self, type_: str, **fields: Any) -> None:
        self._server_events += 1
        self.emit("server", {"event_id": f"event_{self.conn:03d}{self._server_events:018d}", "type": type_, **fields})

    def client(self, type_: str, purpose: str | None = None, **fields: Any) -> str | None:
        event_id = None
        if purpose is not None:
            event_id = f"{purpose}_{self.new_id()}"
            self.emit("client", {"type": type_, "event_id": event_id, **fields})
        else:
            self.emit("client", {"type": type_, **fields})
        return event_id

    def new_id(self) -> str:
        self._ids += 1
        return f"{self.rng.getrandbits(24):06x}{self._ids:06x}"

    def advance(self, seconds: float) -> None:
        self.t += seconds


def _audio_pool(rng: random.Random, size: int, count: int) -> list[str]:
    """Base64 audio chunks (noise: the bytes do not matter, their size does)."""
    return [base64.b64encode(rng.randbytes(size)).decode("ascii") for _ in range(count)]


def _say(rng: random.Random, n: int) -> list[str]:
    start = rng.randrange(len(WORDS))
    return [WORDS[(start + k) % len(WORDS)] for k in range(n)]


def _session(mode: str, rng: random.Random) -> dict[str, Any]:
    return {
        "type": "realtime",
        "object": "realtime.session",
        "id": f"sess_{rng.getrandbits(64):016x}",
        "model": "gpt-realtime",
        "output_modalities": [mode],
        "instructions": "You are a helpful support agent.",
        "tools": [{"type": "function", "name": name, "parameters": {"type": "object"}} for name in TOOLS],
        "tool_choice": "auto",
        "audio": {
            "input": {
                "format": {"type": "audio/pcm", "rate": 24000},
                "turn_detection": {"type": "server_vad", "silence_duration_ms": 500, "create_response": True},
            },
            "output": {"format": {"type": "audio/pcm", "rate": 24000}, "voice": "marin"},
        },
    }


class Session:
    """One client's conversation across connections: the items it holds, in order (ids and call pairing)."""

    def __init__(self, w: TraceWriter, mode: str) -> None:
        self.w = w
        self.mode = mode
        self.items: list[dict[str, Any]] = []
        self.responses = 0
        self.turns = 0

    @property
    def last_id(self) -> str | None:
        return self.items[-1]["id"] if self.items else None

    # -- connections -------------------------------------------------------------------------------------

    def connect(self, replay: bool) -> None:
        w = self.w
        w.conn += 1
        w.emit("meta", {"type": "connection.opened", "path": "/v1/realtime?model=gpt-realtime"})
        w.advance(0.08)
        session = _session(self.mode, w.rng)
        w.server("session.created", session=session)
        w.advance(0.002)
        w.client("session.update", "session_update", session={"type": "realtime", "output_modalities": [self.mode]})
        w.advance(0.05)
        w.server("session.updated", session=session)
        if replay:
            # A client that keeps its conversation re-creates it on the new socket, in order.
            kept, self.items = self.items, []
            for item in kept:
                w.advance(0.0005)
                self.create(item, wait=False)
            w.advance(0.05)
            prev = None
            for item in kept:
                self._added(item, prev)
                prev = item["id"]
                w.advance(0.0003)

    def close(self) -> None:
        self.w.advance(0.2)
        self.w.emit("meta", {"type": "connection.closed", "code": 1000, "reason": "session rotated"})

    # -- items ---------------------------------------------------------------------------------------------

    def create(self, item: dict[str, Any], wait: bool = True) -> None:
        w = self.w
        w.client("conversation.item.create", "chat_ctx_create", previous_item_id=self.last_id or "root", item=item)
        self.items.append(item)
        if wait:
            w.advance(0.04 + w.rng.random() * 0.02)
            self._added(item, self.items[-2]["id"] if len(self.items) > 1 else None)

    def _added(self, item: dict[str, Any], previous: str | None) -> None:
        full = {**item, "object": "realtime.item", "status": "completed"}
        self.w.server("conversation.item.added", previous_item_id=previous, item=full)
        self.w.server("conversation.item.done", previous_item_id=previous, item=full)

    def trim(self, keep: int) -> None:
        """Context management: delete the oldest items (a function call goes with its output) in one burst."""
        w = self.w
        if len(self.items) <= keep:
            return
        doomed: list[dict[str, Any]] = []
        while len(self.items) > keep or (doomed and doomed[-1]["type"] == "function_call"):
            doomed.append(self.items.pop(0))
        for item in doomed:
            w.client("conversation.item.delete", "chat_ctx_delete", item_id=item["id"])
            w.advance(0.0005)
        w.advance(0.04)
        for item in doomed:
            w.server("conversation.item.deleted", item_id=item["id"])
            w.advance(0.0003)

    # -- responses -----------------------------------------------------------------------------------------

    def _response_body(self, rid: str, status: str, output: list[Any], request: str | None) -> dict[str, Any]:
        body: dict[str, Any] = {
            "object": "realtime.response",
            "id": rid,
            "status": status,
            "status_details": None,
            "output": output,
            "conversation_id": "conv_bench",
            "output_modalities": [self.mode],
        }
        if request is not None:
            body["metadata"] = {"client_event_id": request}
        if status == "completed":
            body["usage"] = {"total_tokens": 120 + len(output), "input_tokens": 80, "output_tokens": 40}
        return body

    def respond(self, request: str | None, tool: bool, stream: Any) -> None:
        """One response: a function call (`tool`) or a message whose content `stream` emits."""
        w = self.w
        self.responses += 1
        rid = f"resp_{self.responses:08d}"
        item_id = f"item_r{self.responses:08d}"
        w.server("response.created", response=self._response_body(rid, "in_progress", [], request))
        w.advance(0.01)
        if tool:
            name = TOOLS[self.responses % len(TOOLS)]
            call_id = f"call_{self.responses:08d}"
            args = json.dumps({"city": w.rng.choice(CITIES)})
            item = {"id": item_id, "type": "function_call", "name": name, "call_id": call_id}
            w.server(
                "response.output_item.added",
                response_id=rid,
                output_index=0,
                item={**item, "object": "realtime.item", "status": "in_progress", "arguments": ""},
            )
            w.server(
                "conversation.item.added",
                previous_item_id=self.last_id,
                item={**item, "object": "realtime.item", "status": "in_progress", "arguments": ""},
            )
            for k in range(0, len(args), 6):
                w.advance(0.004)
                w.server(
                    "response.function_call_arguments.delta",
                    response_id=rid,
                    item_id=item_id,
                    output_index=0,
                    call_id=call_id,
                    delta=args[k : k + 6],
                )
            w.server(
                "response.function_call_arguments.done",
                response_id=rid,
                item_id=item_id,
                output_index=0,
                call_id=call_id,
                name=name,
                arguments=args,
            )
            done = {**item, "object": "realtime.item", "status": "completed", "arguments": args}
        else:
            item = {"id": item_id, "type": "message", "role": "assistant"}
            w.server(
                "response.output_item.added",
                response_id=rid,
                output_index=0,
                item={**item, "object": "realtime.item", "status": "in_progress", "content": []},
            )
            w.server(
                "conversation.item.added",
                previous_item_id=self.last_id,
                item={**item, "object": "realtime.item", "status": "in_progress", "content": []},
            )
            part = stream(rid, item_id)
            done = {**item, "object": "realtime.item", "status": "completed", "content": [part]}
        w.server("response.output_item.done", response_id=rid, output_index=0, item=done)
        w.server("conversation.item.done", previous_item_id=self.last_id, item=done)
        w.advance(0.002)
        w.server("response.done", response=self._response_body(rid, "completed", [done], request))
        w.server(
            "rate_limits.updated",
            rate_limits=[{"name": "tokens", "limit": 40000, "remaining": 39000, "reset_seconds": 1.5}],
        )
        self.items.append({k: v for k, v in done.items() if k not in ("object", "status")})

    def _run_tool(self) -> dict[str, Any]:
        """The client runs the tool of the last call and creates its output (confirmed); returns the output item."""
        w = self.w
        call = self.items[-1]
        w.advance(0.2 + w.rng.random() * 0.3)
        out = {"id": f"item_o{self.responses:08d}", "type": "function_call_output", "call_id": call["call_id"]}
        out["output"] = json.dumps({"ok": True, "summary": " ".join(_say(w.rng, 8))})
        self.create(out)
        return out

    def tool_output(self) -> str:
        """The client runs the tool, sends its output, and asks for the next response (returns its event id)."""
        w = self.w
        self._run_tool()
        w.advance(0.003)
        request = self.request_response()
        w.advance(0.3)
        return request

    def tool_output_race(self) -> str:
        """The #7880 race: the output is created and confirmed, then a push computed from a snapshot taken before
        that confirmation deletes it, in one burst with the user's next text (RT101, RT102)."""
        w = self.w
        out = self._run_tool()
        w.advance(0.0017)
        w.client("conversation.item.delete", "chat_ctx_delete", item_id=out["id"])
        self.items.remove(out)
        w.advance(0.0004)
        text = {"type": "input_text", "text": " ".join(_say(w.rng, 6))}
        user = {"id": f"item_t{self.responses:08d}", "type": "message", "role": "user", "content": [text]}
        previous = self.last_id
        self.create(user, wait=False)
        w.advance(0.05)
        w.server("conversation.item.deleted", item_id=out["id"])
        self._added(user, previous)
        w.advance(0.003)
        request = self.request_response()
        w.advance(0.3)
        return request

    def request_response(self) -> str:
        """A `response.create` that asks the server to echo its event id in the metadata."""
        event_id = f"response_create_{self.w.new_id()}"
        self.w.emit(
            "client",
            {"type": "response.create", "event_id": event_id, "response": {"metadata": {"client_event_id": event_id}}},
        )
        return event_id


# -- the voice call ------------------------------------------------------------------------------------------


def voice_call(fp: IO[bytes], seed: int, seconds: float, faults: tuple[str, ...] = ()) -> int:
    """A server-VAD voice call of `seconds`: the client streams 20 ms frames while the user speaks (it mutes
    while the agent talks), the server commits each turn and answers with audio and transcript deltas; every
    third answer is a tool call first. Returns the number of lines written."""
    rng = random.Random(seed)
    w = TraceWriter(fp, rng)
    frames = _audio_pool(rng, FRAME_BYTES, 64)
    chunks = _audio_pool(rng, DELTA_BYTES, 64)
    s = Session(w, "audio")
    s.connect(replay=False)
    w.advance(0.3)
    raced = False
    while w.t < seconds:
        s.turns += 1
        _user_speaks(s, frames)
        tool = s.turns % 3 == 0
        if tool:
            s.respond(None, True, None)
            if "unanswered-call" in faults and s.turns == 3:
                # The fault: the client asks for the next answer without the tool's output.
                w.advance(0.3)
                request = s.request_response()
                w.advance(0.3)
            elif "tool-output-race" in faults and not raced and w.t >= seconds / 2:
                # The fault: halfway through, the tool output is deleted by a stale push (the #7880 race).
                raced = True
                request = s.tool_output_race()
            else:
                request = s.tool_output()
        else:
            request = None
        s.respond(request, False, lambda rid, item_id: _speak(s, rid, item_id, chunks))
        w.advance(0.4 + rng.random() * 0.8)
    s.close()
    return w.lines


def _user_speaks(s: Session, frames: list[str]) -> None:
    w, rng = s.w, s.w.rng
    speech_ms = rng.randint(2000, 9000)
    total = (200 + speech_ms + 500) // FRAME_MS
    item_id = f"item_u{s.turns:08d}"
    start_frame = (200 + 300) // FRAME_MS
    stop_frame = (200 + speech_ms + 500) // FRAME_MS
    t0 = w.t
    for k in range(total):
        w.t = t0 + k * FRAME_MS / 1000 + rng.random() * 0.002
        w.client("input_audio_buffer.append", audio=frames[rng.randrange(len(frames))])
        if k == start_frame:
            w.advance(0.004)
            w.server("input_audio_buffer.speech_started", audio_start_ms=200 + k * FRAME_MS, item_id=item_id)
    w.t = t0 + total * FRAME_MS / 1000 + 0.005
    w.server("input_audio_buffer.speech_stopped", audio_end_ms=stop_frame * FRAME_MS, item_id=item_id)
    w.server("input_audio_buffer.committed", previous_item_id=s.last_id, item_id=item_id)
    item = {"id": item_id, "type": "message", "role": "user"}
    full = {**item, "object": "realtime.item", "status": "completed"}
    w.server("conversation.item.added", previous_item_id=s.last_id, item={**full, "content": [{"type": "input_audio"}]})
    w.server("conversation.item.done", previous_item_id=s.last_id, item={**full, "content": [{"type": "input_audio"}]})
    transcript = " ".join(_say(rng, max(2, speech_ms // 400)))
    w.advance(0.15)
    w.server(
        "conversation.item.input_audio_transcription.completed",
        item_id=item_id,
        content_index=0,
        transcript=transcript,
    )
    s.items.append({**item, "content": [{"type": "input_audio", "transcript": transcript}]})
    w.advance(0.05)


def _speak(s: Session, rid: str, item_id: str, chunks: list[str]) -> dict[str, Any]:
    w, rng = s.w, s.w.rng
    common = {"response_id": rid, "item_id": item_id, "output_index": 0, "content_index": 0}
    w.server("response.content_part.added", **common, part={"type": "audio", "transcript": ""})
    audio_ms = rng.randint(1000, 4000)
    n = audio_ms // DELTA_MS
    words = _say(rng, max(2, audio_ms // 350))
    said: list[str] = []
    per_word = max(1, n // len(words))
    for k in range(n):
        # The server streams faster than real time (about 2x).
        w.advance(DELTA_MS / 2000)
        w.server("response.output_audio.delta", **common, delta=chunks[rng.randrange(len(chunks))])
        if k % per_word == 0 and len(said) < len(words):
            word = words[len(said)]
            said.append(word)
            w.server("response.output_audio_transcript.delta", **common, delta=word + " ")
    transcript = " ".join(words)
    w.server("response.output_audio.done", **common)
    w.server("response.output_audio_transcript.done", **common, transcript=transcript)
    part = {"type": "output_audio", "transcript": transcript}
    w.server("response.content_part.done", **common, part={"type": "audio", "transcript": transcript})
    # The client plays the rest of the answer before the user speaks again.
    w.advance(audio_ms / 2000)
    return part


# -- the text session ----------------------------------------------------------------------------------------


def text_session(fp: IO[bytes], seed: int, seconds: float, faults: tuple[str, ...] = ()) -> int:
    """A text session of `seconds`: user messages, streamed text answers, a tool call every fifth turn, old
    items deleted to bound the context, and a new connection (replaying the conversation) every hour."""
    rng = random.Random(seed)
    w = TraceWriter(fp, rng)
    s = Session(w, "text")
    s.connect(replay=False)
    connected_at = 0.0
    while w.t < seconds:
        if w.t - connected_at > 3600:
            s.close()
            w.advance(0.5)
            s.connect(replay=True)
            connected_at = w.t
        s.turns += 1
        w.advance(4.0 + rng.random() * 16.0)
        words = " ".join(_say(rng, rng.randint(4, 20)))
        content = [{"type": "input_text", "text": words}]
        s.create({"id": f"item_u{s.turns:08d}", "type": "message", "role": "user", "content": content})
        s.trim(40)
        w.advance(0.002)
        request = s.request_response()
        w.advance(0.3 + rng.random() * 0.3)
        if s.turns % 5 == 0:
            s.respond(request, True, None)
            if "unanswered-call" in faults and s.turns == 5:
                w.advance(0.2)
                request = s.request_response()
            else:
                request = s.tool_output()
            w.advance(0.3)
        s.respond(request, False, lambda rid, item_id: _write_text(s, rid, item_id))
    s.close()
    return w.lines


def _write_text(s: Session, rid: str, item_id: str) -> dict[str, Any]:
    w, rng = s.w, s.w.rng
    common = {"response_id": rid, "item_id": item_id, "output_index": 0, "content_index": 0}
    w.server("response.content_part.added", **common, part={"type": "text", "text": ""})
    words = _say(rng, rng.randint(100, 300))
    for word in words:
        w.advance(0.012 + rng.random() * 0.01)
        w.server("response.output_text.delta", **common, delta=word + " ")
    text = " ".join(words)
    w.server("response.output_text.done", **common, text=text)
    w.server("response.content_part.done", **common, part={"type": "text", "text": text})
    return {"type": "output_text", "text": text}


# -- workloads ---------------------------------------------------------------------------------------------

#: name -> (kind, seconds). Scaled by `--scale`.
WORKLOADS: dict[str, tuple[str, float]] = {
    "audio-call": ("voice", 3600.0),
    "event-heavy": ("text", 20 * 3600.0),
}
FLEET_SIZE = 200
#: Every fleet trace lasts between these many seconds; one in four is a voice call.
FLEET_SECONDS = (120.0, 300.0)


def write_trace(path: Path, kind: str, seed: int, seconds: float, faults: tuple[str, ...] = ()) -> int:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    with tmp.open("wb", buffering=1 << 20) as fp:
        lines = (voice_call if kind == "voice" else text_session)(fp, seed, seconds, faults)
    tmp.replace(path)
    return lines


def fleet_plan(seed: int, count: int, scale: float) -> list[tuple[str, str, int, float, tuple[str, ...]]]:
    """(file name, kind, seed, seconds, faults) of each fleet trace. A few carry a known fault."""
    rng = random.Random(seed * 1_000_003 + count)
    plan = []
    for k in range(count):
        kind = "voice" if k % 4 == 0 else "text"
        seconds = rng.uniform(*FLEET_SECONDS) * scale
        faults: tuple[str, ...] = ("unanswered-call",) if k % 10 == 3 else ()
        plan.append((f"trace-{k:03d}.jsonl", kind, seed + 1000 + k, seconds, faults))
    return plan


def _fingerprint(params: dict[str, Any]) -> str:
    source = Path(__file__).read_bytes()
    return hashlib.sha256(source + orjson.dumps(params, option=orjson.OPT_SORT_KEYS)).hexdigest()[:16]


def generate(
    out: Path, seed: int = DEFAULT_SEED, scale: float = 1.0, fleet_size: int = FLEET_SIZE, force: bool = False
) -> dict[str, Any]:
    """Write every workload under `out` (skipped when the manifest says they are current). Returns the manifest."""
    params = {"seed": seed, "scale": scale, "fleet_size": fleet_size}
    manifest_path = out / "MANIFEST.json"
    fingerprint = _fingerprint(params)
    if not force and manifest_path.exists():
        manifest = orjson.loads(manifest_path.read_bytes())
        files = [out / name for name in manifest.get("files", {})]
        if manifest.get("fingerprint") == fingerprint and all(p.exists() for p in files):
            return dict(manifest)
    out.mkdir(parents=True, exist_ok=True)
    files: dict[str, dict[str, Any]] = {}
    for name, (kind, seconds) in WORKLOADS.items():
        started = time.perf_counter()
        path = out / f"{name}.jsonl"
        lines = write_trace(path, kind, seed, seconds * scale)
        files[path.name] = {"lines": lines, "bytes": path.stat().st_size}
        print(f"{path}: {lines:,} lines, {path.stat().st_size / 1e6:.0f} MB in {time.perf_counter() - started:.1f} s")
    started = time.perf_counter()
    fleet_dir = out / "fleet"
    if fleet_dir.exists():
        for old in fleet_dir.glob("*.jsonl"):
            old.unlink()
    total = 0
    for fname, kind, tseed, seconds, faults in fleet_plan(seed, fleet_size, scale):
        path = fleet_dir / fname
        lines = write_trace(path, kind, tseed, seconds, faults)
        files[f"fleet/{fname}"] = {"lines": lines, "bytes": path.stat().st_size}
        total += lines
    print(f"{fleet_dir}: {fleet_size} traces, {total:,} lines in {time.perf_counter() - started:.1f} s")
    manifest = {"fingerprint": fingerprint, "params": params, "files": files}
    manifest_path.write_bytes(orjson.dumps(manifest, option=orjson.OPT_INDENT_2))
    return manifest


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output directory (default: bench/data)")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument("--scale", type=float, default=1.0, help="multiply every duration (0.1: a quick run)")
    parser.add_argument("--fleet-size", type=int, default=FLEET_SIZE)
    parser.add_argument("--force", action="store_true", help="regenerate even when the data is current")
    args = parser.parse_args(argv)
    generate(args.out, args.seed, args.scale, args.fleet_size, args.force)
    return 0


if __name__ == "__main__":
    sys.exit(main())
