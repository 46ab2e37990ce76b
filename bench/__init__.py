"""Benchmarks of rtrace: workload generator (`bench.generate`) and runner (`bench.run`). Not part of the package."""
