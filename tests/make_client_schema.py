"""Writes `rtrace/net/fake/client_events.schema.json`, the schema serve validates client events against
(`rtrace.net.fake.schema`), from the openai Python SDK's realtime types: the pydantic models generated from OpenAI's
own API specification, `openai.types.realtime.RealtimeClientEvent` (a union of the eleven client events).

Run by hand with the SDK's environment (it is not one of rtrace's dependencies), and commit the output:

    .venv-e2e-openai/bin/python tests/make_client_schema.py           # writes the file
    .venv-e2e-openai/bin/python tests/make_client_schema.py --check   # exit 1 when it is not up to date

What is done to the SDK's JSON schema, and why:
- titles, descriptions, defaults and examples are dropped (the file is data for a validator, not documentation);
- an object with declared properties is closed: the API answers an unknown field with `unknown_parameter` (the SDK's
  models allow extra fields only so that old SDKs read new servers); a free-form object (`Dict[str, object]`:
  a tool's `parameters`, `metadata`) stays open;
- `NARROWER` lists where the server accepts less than the SDK's types say, each with its evidence.
`tests/test_net_fake_schema.py` checks, when the SDK is installed, that the committed file is what this script makes.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

OUT = Path(__file__).resolve().parent.parent / "rtrace" / "net" / "fake" / "client_events.schema.json"

#: (definition, property path inside it) -> the values the server accepts, narrower than the SDK's type.
NARROWER: dict[tuple[str, str], list[str]] = {
    # The realapi recording `history-seed-rejected-item`: an assistant item created by the client may hold text only
    # ("Invalid value: 'text'. Value must be 'output_text'."); audio content is what the server's own answers hold.
    ("openai__types__realtime__realtime_conversation_item_assistant_message__Content", "type"): ["output_text"],
}

DROP = frozenset({"title", "description", "default", "examples"})


def compact(node: Any) -> Any:
    if isinstance(node, list):
        return [compact(x) for x in node]
    if not isinstance(node, dict):
        return node
    out = {k: compact(v) for k, v in node.items() if k not in DROP}
    if isinstance(node.get("properties"), dict):  # field names, not keywords: `description` is a tool's field
        out["properties"] = {k: compact(v) for k, v in node["properties"].items()}
    if isinstance(node.get("$defs"), dict):
        out["$defs"] = {k: compact(v) for k, v in node["$defs"].items()}
    if out.get("type") == "object" and "properties" in out:
        out["additionalProperties"] = False
    return out


def narrow(defs: dict[str, Any]) -> None:
    for (name, prop), values in NARROWER.items():
        node = defs[name]["properties"][prop]
        for alt in node.get("anyOf", [node]):
            if alt.get("type") == "string":
                alt.pop("const", None)
                alt["enum"] = values


def schema() -> dict[str, Any]:
    import openai
    from openai.types.realtime.realtime_client_event import RealtimeClientEvent
    from pydantic import TypeAdapter

    raw = TypeAdapter(RealtimeClientEvent).json_schema()
    out = compact(raw)
    narrow(out["$defs"])
    return {"source": f"openai {openai.__version__}: openai.types.realtime.RealtimeClientEvent", **out}


def render(data: dict[str, Any]) -> str:
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    text = render(schema())
    if args == ["--check"]:  # exit 1 when the committed file is not what the SDK's types make
        same = OUT.read_text(encoding="utf-8") == text
        print(f"{OUT}: {'up to date' if same else 'differs from what the SDK makes'}")
        return 0 if same else 1
    OUT.write_text(text, encoding="utf-8")
    print(f"wrote {OUT} ({OUT.stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
