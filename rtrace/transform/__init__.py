"""File-to-file work on traces: `redact` (publishing). Builds on core, rules and engine; nothing below imports it."""
