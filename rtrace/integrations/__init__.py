"""In-process recorders for client frameworks. Each submodule imports its framework lazily, so rtrace itself never
needs one installed."""
