"""The fake realtime endpoint, sans I/O: one connection's protocol (`endpoint`), its speech and VAD, responses,
tools, the client events' schema, recorded responses (`playback`, `ids`), fidelity to real recordings, frames
(`wire`) and the endpoint's options. Imports only `rtrace.core` and `net.faults`: no asyncio, no socket, no clock."""
