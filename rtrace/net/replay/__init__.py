"""Network replay of a recorded trace: one connection's replay, sans I/O (`session`), and the runner that moves
its frames (`runner`). Imports core, engine, rules and `net.faults`, `net.fake`, `net.link`; never `net.hunt`."""
