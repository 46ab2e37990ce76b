"""tests/sweep_client.py with its URL hard-coded to the real service (`wss://api.openai.com/v1/realtime`), as an
agent library that takes no base URL: reachable only through `--intercept` (Python `websockets` 15+ goes through
`https_proxy`, and trusts what `SSL_CERT_FILE` names). Run as a script."""

from __future__ import annotations

import asyncio
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import sweep_client

if __name__ == "__main__":
    os.environ["RTRACE_URL"] = "wss://api.openai.com/v1"  # whatever it was told: the URL is its own
    sys.exit(asyncio.run(sweep_client.main()))
