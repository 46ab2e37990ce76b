"""rtrace: trace analyzer and race detector for realtime LLM websocket sessions."""

from . import _compiled

__version__ = "0.1.0"

_compiled.choose()  # before any module of the fold is imported: compiled, or from its source (see `_compiled`)
