"""The pure core: the trace model and its readers, the event catalog, the conversation model and `step`.

Imports nothing else of rtrace and no asyncio, websockets, rich or typer (held by tests/test_layers.py).
"""
