"""Benchmarks: scripts that print medians and ratios measured side by side in one run."""
