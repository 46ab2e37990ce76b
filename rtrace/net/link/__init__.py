"""The asyncio layers that move frames and time: `rtrace serve` (`server`), `rtrace record` (`proxy`), TLS,
`--intercept`, a hunt's link to a real upstream (`upstream`), lateness, live findings, what they share (`common`).
Imports core, engine, rules, `net.faults` and `net.fake`; never `net.replay` or `net.hunt`."""
