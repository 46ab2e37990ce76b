"""The network floor. The fake realtime endpoint, sans I/O: `endpoint` (one connection's protocol), `responses`,
`tools` (which tool a response calls, arguments from its schema), `vad` (server VAD), `script` (scenario scripts),
`playback` (recorded responses), `faults`, `wire` (frames and the API's objects), `examples` (what the help shows).
The asyncio layers that move its frames and time: `server` (`rtrace serve`), `proxy` (`rtrace record`), `replay`,
`sweep`; what they share is `common`. Renders nothing (tables live in `rtrace.report`)."""
