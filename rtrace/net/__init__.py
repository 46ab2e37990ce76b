"""The network floor: the fake realtime endpoint (sans I/O) and the asyncio layers that move its frames and time:
`serve`, the recording proxy, replay and sweep. Renders nothing (tables live in `rtrace.report`)."""
