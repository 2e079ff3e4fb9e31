"""Benchmarks: scripts that print figures measured side by side in one run
(``python -m hwlab.bench.NAME``). Never timed tests."""
