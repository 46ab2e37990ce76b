"""A corpus of planted secrets, one per way a credential reaches a trace (`rtrace.core.secrets` names the model):
field names, value patterns, encodings, JSON inside strings, header shapes, object keys, close reasons, URLs, and
secrets split across streamed deltas. Each plant is a few trace lines and the needles that must not survive;
`survivors` says which needles an output still holds (in its bytes, its strings URL- or base64-decoded, and the
joined text of every stream of deltas). Used by tests/test_hardening.py and bench/harden.py.
"""

from __future__ import annotations

import base64
import dataclasses
import urllib.parse
from collections.abc import Iterator
from typing import Any

import orjson

from rtrace.core.secrets import STREAMS


@dataclasses.dataclass
class Plant:
    name: str
    #: Which part of the model must catch it.
    kind: str
    #: (dir, event) lines; a plant's lines follow one another on connection 1.
    lines: list[tuple[str, dict[str, Any]]]
    #: Strings none of which may appear in an output.
    needles: list[str]
    #: The plant is client text a `--user-text` redaction replaces anyway (still checked without it).
    text: bool = False


def _value(i: int, kind: str = "") -> str:
    """A secret no pattern knows: only its field name, its encoding or its context gives it away."""
    return f"PlAnT{i:03d}{kind}Zq9Xw7Vu5"


def _key(i: int) -> str:
    return f"sk-proj-PLANTED{i:03d}abcdefghijklmnopqrstuvwxyz0123"


def _ek(i: int) -> str:
    return f"ek_{i:03d}Xy"


def _jwt(i: int) -> str:
    head = base64.urlsafe_b64encode(b'{"alg":"HS256","typ":"JWT"}').decode().rstrip("=")
    body = base64.urlsafe_b64encode(f'{{"sub":"planted-{i}","n":{i}}}'.encode()).decode().rstrip("=")
    return f"{head}.{body}.SiGnAtUrE{i:03d}abcdefghij"


def _user_item(text: str, item_id: str) -> dict[str, Any]:
    return {"id": item_id, "type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def _create(item: dict[str, Any], event_id: str) -> tuple[str, dict[str, Any]]:
    return ("client", {"type": "conversation.item.create", "event_id": event_id, "item": item})


def _deltas(etype: str, pieces: list[str], **ids: Any) -> list[tuple[str, dict[str, Any]]]:
    return [("server", {"type": etype, "event_id": f"ev_d{k}", **ids, "delta": p}) for k, p in enumerate(pieces)]


def _split(secret: str, sizes: list[int]) -> list[str]:
    out, at = [], 0
    for n in sizes:
        out.append(secret[at : at + n])
        at += n
    if at < len(secret):
        out.append(secret[at:])
    return [p for p in out if p]


def plants() -> list[Plant]:
    out: list[Plant] = []
    i = 0

    def add(
        name: str, kind: str, lines: list[tuple[str, dict[str, Any]]], needles: list[str], text: bool = False
    ) -> None:
        out.append(Plant(name, kind, lines, needles, text))

    # -- field names: the value itself matches no pattern --------------------------------------------------------------
    names = [
        "authorization", "Authorization", "api_key", "api-key", "apiKey", "openaiApiKey", "x-api-key", "X-Goog-Api-Key",
        "bearer_token", "auth_token", "id_token", "access_token", "refresh_token", "session_token", "private_key",
        "secret_key", "client_secret", "password", "passwd", "passphrase", "secret", "token", "cookie", "Set-Cookie",
        "credentials", "azure_api_key", "x_auth", "signature", "ephemeral_key", "secretValue", "userPassword",
    ]  # fmt: skip
    for name in names:
        i += 1
        v = _value(i)
        where = i % 4
        if where == 0:
            ev = {"type": "session.update", "event_id": f"c{i}", "session": {"type": "realtime", name: v}}
        elif where == 1:
            ev = {"type": "response.create", "event_id": f"c{i}", "response": {"metadata": {name: v}}}
        elif where == 2:
            ev = {"type": "session.update", "event_id": f"c{i}", "session": {"headers": {name: v}}}
        else:
            ev = {
                "type": "session.update",
                "event_id": f"c{i}",
                "session": {"tools": [{"config": {name: [v, {"x": v}]}}]},
            }
        add(f"field {name}", "field name", [("client", ev)], [v])
    i += 1
    v = _value(i)
    add(
        "credentials object",
        "field name",
        [("client", {"type": "session.update", "session": {"credentials": {"username": "u", "pw": v}}})],
        [v],
    )
    i += 1
    v = _ek(i)
    add(
        "client_secret object (short ek_)",
        "field name",
        [("server", {"type": "session.created", "session": {"client_secret": {"value": v, "expires_at": 1}}})],
        [v],
    )

    # -- header shapes ---------------------------------------------------------------------
    for k, header in enumerate(["Authorization", "api-key", "Cookie", "X-Api-Key", "OpenAI-Api-Key"]):
        i += 1
        v = _value(i)
        shape: Any = [{"name": header, "value": f"Bearer {v}" if k == 0 else v}, {"name": "Accept", "value": "x"}]
        if k == 3:
            shape = [[header, v], ["Accept", "x"]]
        if k == 4:
            shape = [{"key": header, "value": v}]
        add(
            f"header shape {header}",
            "header shape",
            [("client", {"type": "session.update", "session": {"har": {"headers": shape}}})],
            [v],
        )

    # -- value patterns in free text ---------------------------------------------------------------------
    def text_plant(name: str, kind: str, text: str, needles: list[str]) -> None:
        nonlocal i
        i += 1
        add(name, kind, [_create(_user_item(text, f"item_t{i}"), f"c{i}")], needles, text=True)

    i += 1
    text_plant("sk- key in text", "value pattern", f"my key is {_key(i)} ok", [_key(i)[8:]])
    i += 1
    text_plant("short ek_ in text", "value pattern", f"ephemeral {_ek(i)} here", [_ek(i)])
    i += 1
    text_plant("Bearer in text", "value pattern", f"send Bearer {_value(i)}.x9 to it", [_value(i)])
    i += 1
    basic = base64.b64encode(f"user{i}:{_value(i)}".encode()).decode()
    text_plant("Basic credentials", "value pattern", f"Authorization was Basic {basic} then", [basic, _value(i)])
    i += 1
    text_plant("JWT in text", "value pattern", f"id token {_jwt(i)} end", [_jwt(i).split(".")[1]])
    i += 1
    text_plant("AWS key", "value pattern", f"aws AKIA{i:04d}ABCDEFGHIJKL here", [f"AKIA{i:04d}ABCDEFGHIJKL"])
    i += 1
    text_plant("GitHub token", "value pattern", f"gh token ghp_{_value(i)}abcdefghij", [f"ghp_{_value(i)}"])
    i += 1
    text_plant("Slack token", "value pattern", f"xoxb-{i}-{_value(i)}", [_value(i)])
    i += 1
    text_plant("Google key", "value pattern", f"AIza{_value(i)}abcdefghijklmnop", [_value(i)])
    i += 1
    text_plant("Stripe key", "value pattern", f"sk_live_{_value(i)}abcdef", [_value(i)])
    i += 1
    pem = f"-----BEGIN PRIVATE KEY-----\nMIIEv{_value(i)}QIBADANBgkq\n-----END PRIVATE KEY-----"
    text_plant("PEM private key", "value pattern", f"here:\n{pem}\n", [_value(i)])
    i += 1
    text_plant("api-key: in text", "value pattern", f"use api-key: {_value(i)} now", [_value(i)])
    i += 1
    text_plant("password= in text", "value pattern", f"login with password={_value(i)}&user=x", [_value(i)])
    i += 1
    text_plant("my password is", "value pattern", f"my password is {_value(i)}", [_value(i)])
    i += 1
    text_plant("token= in text", "value pattern", f"token={_value(i)}", [_value(i)])
    i += 1
    text_plant("secret: in JSON-ish text", "value pattern", f'cfg {{"secret": "{_value(i)}", "n": 1', [_value(i)])
    i += 1
    text_plant("subprotocol key in text", "value pattern", f"openai-insecure-api-key.{_value(i)}", [_value(i)])
    i += 1
    text_plant("wss://user:pw@host", "URL userinfo", f"wss://bob:{_value(i)}@api.example/v1", [_value(i)])
    i += 1
    text_plant("wss://key@host", "URL userinfo", f"connect to wss://{_value(i)}@api.example/v1", [_value(i)])
    i += 1
    text_plant("?api-key= in a URL", "query parameter", f"https://h/v1?model=m&api-key={_value(i)}", [_value(i)])
    i += 1
    text_plant("?key= in a URL", "query parameter", f"https://h/v1?key={_value(i)}&x=1", [_value(i)])
    i += 1
    text_plant("&sig= in a URL", "query parameter", f"https://h/blob?sv=1&sig={_value(i)}", [_value(i)])

    # -- encodings ---------------------------------------------------------------------
    i += 1
    text_plant("Bearer%20 (URL-encoded)", "URL encoding", f"h=Authorization%3A%20Bearer%20{_value(i)}1x", [_value(i)])
    i += 1
    key = _key(i)
    text_plant("sk%2Dproj (URL-encoded)", "URL encoding", "k=" + key.replace("-", "%2D"), [key[8:]])
    i += 1
    key = _key(i)
    text_plant("fully percent-encoded key", "URL encoding", "".join(f"%{b:02X}" for b in key.encode()), [key[8:]])
    i += 1
    key = _key(i)
    text_plant(
        "double URL-encoded", "URL encoding", urllib.parse.quote(urllib.parse.quote(f"api-key={key}")), [key[8:]]
    )
    i += 1
    key = _key(i)
    text_plant("base64 key", "base64", base64.b64encode(key.encode()).decode(), [key[8:]])
    i += 1
    blob = base64.b64encode(orjson.dumps({"api_key": _value(i)})).decode()
    text_plant("base64 JSON", "base64", blob, [blob, _value(i)])
    i += 1
    blob = base64.urlsafe_b64encode(f"Bearer {_value(i)}.9".encode()).decode()
    text_plant("base64url Bearer", "base64", blob, [blob, _value(i)])

    # -- JSON inside strings ---------------------------------------------------------------------
    i += 1
    v1, v2, v3 = _value(i, "a"), _value(i, "b"), _value(i, "c")
    args = orjson.dumps({"api_key": v1, "password": v2, "token": v3, "city": "Paris"}).decode()
    add(
        "tool arguments holding JSON secrets",
        "JSON in a string",
        [
            _create(
                {"id": f"item_fc{i}", "type": "function_call", "call_id": f"call_{i}", "name": "f", "arguments": args},
                f"c{i}",
            )
        ],
        [v1, v2, v3],
    )
    i += 1
    v1 = _value(i)
    output = orjson.dumps({"ok": True, "auth": {"bearer_token": v1}, "list": [{"credentials": [v1]}]}).decode()
    add(
        "tool output holding JSON secrets",
        "JSON in a string",
        [_create({"id": f"item_o{i}", "type": "function_call_output", "call_id": "call_x", "output": output}, f"c{i}")],
        [v1],
    )
    i += 1
    v1 = _value(i)
    inner = orjson.dumps({"password": v1}).decode()
    output = orjson.dumps({"result": inner}).decode()
    add(
        "JSON in JSON in a string",
        "JSON in a string",
        [_create({"id": f"item_o{i}", "type": "function_call_output", "call_id": "call_y", "output": output}, f"c{i}")],
        [v1],
    )
    i += 1
    v1 = _value(i)
    add(
        "arguments.done holding JSON secrets",
        "JSON in a string",
        [
            (
                "server",
                {
                    "type": "response.function_call_arguments.done",
                    "item_id": "i",
                    "call_id": "c",
                    "arguments": orjson.dumps({"client_secret": v1}).decode(),
                },
            )
        ],
        [v1],
    )

    # -- keys as object keys, close reasons, errors --------------------------------------------------------------------
    i += 1
    key = _key(i)
    add(
        "key as a JSON object key",
        "object key",
        [("client", {"type": "response.create", "response": {"metadata": {key: "x"}}})],
        [key[8:]],
    )
    i += 1
    v1 = _value(i)
    add(
        "api-key= in a close reason",
        "value pattern",
        [("meta", {"type": "connection.closed", "by": "server", "code": 4000, "reason": f"bad api-key={v1}"})],
        [v1],
    )
    i += 1
    key = _key(i)
    add(
        "key in an error message",
        "value pattern",
        [
            (
                "server",
                {
                    "type": "error",
                    "error": {
                        "type": "invalid_request_error",
                        "code": "invalid_api_key",
                        "message": f"Incorrect API key provided: {key}.",
                    },
                },
            )
        ],
        [key[8:]],
    )
    i += 1
    key = _key(i)
    add(
        "key in a connection path",
        "query parameter",
        [("meta", {"type": "connection.opened", "path": f"/v1/realtime?model=m&api-key={key}"})],
        [key[8:]],
    )

    # -- secrets split across streamed deltas ---------------------------------------------------------------------
    stream_ids = {"response_id": "resp_s", "item_id": "item_s", "output_index": 0, "content_index": 0}
    i += 1
    key = _key(i)
    add(
        "key split across text deltas",
        "streamed deltas",
        _deltas(
            "response.output_text.delta", ["Your key: ", *_split(key, [4, 7, 9, 13]), " keep it safe."], **stream_ids
        ),
        [key[8:], key[8:20], key[25:]],
    )
    i += 1
    key = _key(i)
    add(
        "key split into 1-character transcript deltas",
        "streamed deltas",
        _deltas("response.output_audio_transcript.delta", ["it is ", *list(key), "."], **stream_ids),
        [key[8:]],
    )
    i += 1
    v1 = _value(i)
    add(
        "password= split across beta text deltas",
        "streamed deltas",
        _deltas("response.text.delta", ["set pass", "word", "=", v1[:5], v1[5:]], **stream_ids),
        [v1, v1[5:]],
    )
    i += 1
    v1 = _value(i)
    args = orjson.dumps({"city": "Paris", "api_key": v1}).decode()
    add(
        "JSON secret split across argument deltas",
        "streamed deltas",
        _deltas(
            "response.function_call_arguments.delta",
            _split(args, [5, 9, 6, 8, 4]),
            response_id="resp_s",
            item_id="item_fc",
            call_id="call_s",
        ),
        [v1],
    )
    i += 1
    v1 = _value(i)
    add(
        "Bearer split across input transcription deltas",
        "streamed deltas",
        _deltas(
            "conversation.item.input_audio_transcription.delta",
            ["say Bear", "er ", v1[:7], v1[7:] + "9.x", " please"],
            item_id="item_in",
            content_index=0,
        ),
        [v1, v1[7:]],
    )
    i += 1
    key = _key(i)
    pieces = _split(key, [6, 10, 10])
    lines: list[tuple[str, dict[str, Any]]] = []
    for k, p in enumerate(pieces):
        lines += _deltas("response.output_text.delta", [p], **stream_ids)
        lines.append(("client", {"type": "input_audio_buffer.append", "event_id": f"a{k}", "audio": "AAAA"}))
        lines += _deltas("response.output_audio_transcript.delta", ["noise "], **stream_ids)
    add("key split with other events between", "streamed deltas", lines, [key[8:], key[16:]])
    i += 1
    ek = _ek(i)
    add(
        "short ek_ split across deltas",
        "streamed deltas",
        _deltas("response.output_text.delta", ["the ephemeral is e", "k_", ek[3:], " ok"], **stream_ids),
        [ek[3:]],
    )
    return out


PLANTS = plants()


def corpus_lines(plants: list[Plant] | None = None) -> list[dict[str, Any]]:
    """Every plant as native trace lines: a session, then the plants in order (each on its own connection)."""
    out: list[dict[str, Any]] = []
    t = 0.0
    for n, plant in enumerate(PLANTS if plants is None else plants, 1):
        t += 0.01
        out.append({"t": t, "dir": "meta", "conn": n, "event": {"type": "connection.opened", "path": "/v1/realtime"}})
        for direction, event in plant.lines:
            t += 0.001
            out.append({"t": round(t, 6), "dir": direction, "conn": n, "event": event})
    return out


def stream_plants(plants: list[Plant] | None = None) -> list[Plant]:
    """The plants whose secret is split across the deltas of a response (what `serve --from` plays back)."""
    return [
        p
        for p in (PLANTS if plants is None else plants)
        if p.kind == "streamed deltas" and any("response_id" in e for _, e in p.lines)
    ]


def responses_lines(plants: list[Plant]) -> list[dict[str, Any]]:
    """A recording of one response per stream plant (created, its deltas, done): a `serve --from` trace."""
    out: list[dict[str, Any]] = []
    t = 0.0
    for k, plant in enumerate(plants):
        rid = f"resp_{k}"
        body = [{"type": "response.created", "response": {"id": rid, "status": "in_progress", "output": []}}]
        body += [{**e, "response_id": rid} for _, e in plant.lines if "response_id" in e]
        body.append({"type": "response.done", "response": {"id": rid, "status": "completed", "output": []}})
        for event in body:
            t += 0.0001
            out.append({"t": round(t, 6), "dir": "server", "conn": 1, "event": event})
    return out


async def keyed_session(base_url: str, key: str, events: list[dict[str, Any]]) -> None:
    """A client that connects to `base_url` with `key` in the query, a header and the browser subprotocol, sends
    `events`, and reads until the other side closes."""
    import contextlib

    from websockets.asyncio.client import connect
    from websockets.exceptions import ConnectionClosed

    async with connect(
        f"{base_url}/realtime?model=m&api-key={key}",
        additional_headers=[("Authorization", f"Bearer {key}"), ("api-key", key)],
        subprotocols=["realtime", f"openai-insecure-api-key.{key}"],  # type: ignore[list-item]
        max_size=None,
    ) as ws:
        for event in events:
            await ws.send(orjson.dumps(event).decode())
        with contextlib.suppress(ConnectionClosed):
            async for _ in ws:
                pass


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield str(k)
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def _decodings(text: str) -> Iterator[str]:
    yield text
    once = urllib.parse.unquote(text)
    yield once
    yield urllib.parse.unquote(once)
    for word in text.split():
        for decode in (base64.b64decode, base64.urlsafe_b64decode):
            try:
                yield decode(word + "=" * (-len(word) % 4)).decode("utf-8", "replace")
            except (ValueError, TypeError):
                pass


def views(data: bytes) -> list[str]:
    """What a reader of `data` can see: its text, every string in it (decoded from URL encoding and base64), and the
    joined text of each stream of deltas in it."""
    text = data.decode("utf-8", "replace")
    out = [text]
    streams: dict[tuple[Any, ...], list[str]] = {}
    for raw in data.splitlines():
        try:
            obj = orjson.loads(raw)
        except orjson.JSONDecodeError:
            continue
        for s in _strings(obj):
            out.extend(_decodings(s))
        event = obj.get("event") if isinstance(obj, dict) else None
        if isinstance(event, dict) and event.get("type") in STREAMS:
            field, names, family = STREAMS[event["type"]]
            key = (obj.get("conn"), family, *(str(event.get(n)) for n in names))
            if isinstance(event.get(field), str):
                streams.setdefault(key, []).append(event[field])
    out.extend("".join(parts) for parts in streams.values())
    return out


def survivors(data: bytes, plants: list[Plant] | None = None) -> list[str]:
    """The names of the plants one of whose needles `data` still shows."""
    seen = views(data)
    return [p.name for p in (PLANTS if plants is None else plants) if any(n in v for n in p.needles for v in seen)]
