"""Benchmarks: medians and ratios measured side by side in one run (never timed tests)."""
