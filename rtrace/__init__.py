"""rtrace: trace analyzer and race detector for realtime LLM websocket sessions."""

__version__ = "0.1.0"
